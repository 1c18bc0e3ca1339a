"""The watch daemon and its state file when the file misbehaves: its disk full, a damaged row, a second daemon
on it. In each, the alert still leaves (a webhook stand-in on loopback receives it) and the fault is one line."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import subprocess
import sys
import time

from sim_cli import cli, sim_env  # noqa: F401 (fixture)
from sim_fixtures import sim_host_config
from waiting import await_for
from webhook_stub import Receiver, serving

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import ENGINE_FAILED, AlertThresholds
from console.hosts.endpoints import JsonPoster
from console.ops.watch import WEBHOOK, AlertStore, Sink, WatchDaemon

OOM_UNIT = "sim-k26@tp4ep2.service"  # dies of a CUDA OOM at each start


async def until(predicate, timeout_s: float = 60.0, what: str = "condition") -> None:
    await await_for(predicate, what, timeout_s=timeout_s)


def failed_firing(receiver: Receiver) -> bool:
    return any(a["labels"]["alertname"] == ENGINE_FAILED and a["status"] == "firing" for a in receiver.alerts())


def fill(store: AlertStore) -> None:
    """Make the state file full: SQLite's own SQLITE_FULL ("database or disk is full"), as on a full disk."""
    db = store._db
    (pages,) = db.execute("PRAGMA page_count").fetchone()
    db.execute(f"PRAGMA max_page_count = {pages + 2}")
    for size in (4000, 400, 40, 1):  # old resolved incidents fill every page there is
        with contextlib.suppress(sqlite3.OperationalError):
            while True:
                db.execute("INSERT INTO watch_alerts (fingerprint, alertname, host, labels_json, annotations_json,"
                           " starts_at, ends_at, updated_at) VALUES ('p', 'Pad', 'pad', '[]', ?, 1, 2, 2)",
                           ("[]" + " " * size,))


@contextlib.asynccontextmanager
async def watching(host, store: AlertStore, url: str, lines: list[str]):
    config = ConsoleConfig(path=store.path.parent / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=AlertThresholds(state_grace_s=0.5)))
    daemon = WatchDaemon([host], config, store, [Sink(JsonPoster(url, name="webhook http://127.0.0.1"), WEBHOOK)],
                         say=lines.append)
    task = asyncio.create_task(daemon.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()


async def test_a_full_state_disk_still_delivers_the_alert_from_memory_and_says_so(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("full", time_scale=0.01))
    store = AlertStore(tmp_path / "audit.sqlite3")
    fill(store)
    receiver, lines = Receiver(), []
    async with serving(receiver) as url, watching(host, store, url, lines) as task:
        await host.services.start(OOM_UNIT)
        await receiver.wait_for(lambda: failed_firing(receiver), what="the failure at the webhook")
        assert not task.done()  # no callback died of the write it could not make
        assert store.firing() == []
        store._db.execute("DELETE FROM watch_alerts WHERE host = 'pad'")  # the disk freed
        await until(lambda: [a.label("alertname") for a in store.firing()] == [ENGINE_FAILED],
                    what="the alert recorded once the state file is writable")
    assert any("is writable again" in line for line in lines)
    full = [line for line in lines if "the disk is full" in line]
    assert len(full) == 1 and "delivered from memory" in full[0], lines
    assert any(line.startswith("FIRING ServeEngineFailed") for line in lines)
    store.close()


async def test_a_damaged_row_is_skipped_and_said_and_alerting_goes_on(sim_hosts, tmp_path):
    path = tmp_path / "audit.sqlite3"
    AlertStore(path).close()  # the tables
    db = sqlite3.connect(path)
    db.execute("INSERT INTO watch_alerts (fingerprint, alertname, host, labels_json, annotations_json, starts_at,"
               " ends_at, updated_at) VALUES ('x', 'ServeEngineFailed', 'bad', '[[\"alertname\", \"Serve', '[]', 1,"
               " NULL, 1)")  # a firing row cut short
    db.execute("INSERT INTO watch_alerts (fingerprint, alertname, host, labels_json, annotations_json, starts_at,"
               " ends_at, updated_at) VALUES ('y', 'ServeEngineFailed', 'bad', '[[\"host\", \"bad\"]]', 'null', 1, 2,"
               " 1)")
    db.execute("INSERT INTO watch_outbox (sink, status, alert_id, created_at) VALUES"
               " ('webhook http://127.0.0.1', 'resolved', last_insert_rowid(), 1)")  # owed, null annotations
    db.commit()
    db.close()
    host = sim_hosts(sim_host_config("rows", time_scale=0.01))
    store = AlertStore(path)
    receiver, lines = Receiver(), []
    async with serving(receiver) as url, watching(host, store, url, lines) as task:
        await host.services.start(OOM_UNIT)
        await receiver.wait_for(lambda: failed_firing(receiver), what="the failure at the webhook")
        assert not task.done()
    damaged = [line for line in lines if "is damaged" in line]
    assert len(damaged) == 2 and all("skipped" in line and "\n" not in line for line in damaged), lines
    assert "row 1 is damaged (labels_json is not JSON)" in damaged[0]
    assert "row 2 is damaged (annotations_json is not a list" in damaged[1]
    assert [a.label("host") for a in store.firing()] == ["rows"]
    assert store.counters() == {"damaged:webhook http://127.0.0.1": 1}
    store.close()


def test_alerts_lists_around_a_damaged_row(sim_env):  # noqa: F811
    cwd, env = sim_env
    path = cwd / "state" / "audit.sqlite3"
    store = AlertStore(path)
    store._db.execute("INSERT INTO watch_alerts (fingerprint, alertname, host, labels_json, annotations_json,"
                      " starts_at, ends_at, updated_at) VALUES ('x', 'ServeEngineFailed', 'h', '{', '[]', 1, NULL, 1)")
    store.close()
    listed = cli(cwd, env, "alerts")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert "watch_alerts row 1 is damaged" in listed.stderr and listed.stderr.count("\n") == 1


def test_a_second_daemon_on_the_same_state_file_is_refused_naming_the_first(sim_env):  # noqa: F811
    cwd, env = sim_env
    (cwd / "hosts.toml").write_text((cwd / "hosts.toml").read_text() + "\n[watch]\ninterval_s = 0.5\n")
    first = subprocess.Popen([sys.executable, "-m", "console", "watch"], cwd=cwd, env=env,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "watching" not in line:
            line = first.stderr.readline()
        assert "watching" in line
        second = cli(cwd, env, "watch", timeout=60)
        assert second.returncode == 1, second.stderr
        assert second.stderr.count("\n") == 1 and f"(pid {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 0
    again = subprocess.Popen([sys.executable, "-m", "console", "watch"], cwd=cwd, env=env,
                             stderr=subprocess.PIPE, text=True)  # the lock went with the first
    try:
        line = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "watching" not in line and again.poll() is None:
            line = again.stderr.readline()
        assert "watching" in line
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=30)
