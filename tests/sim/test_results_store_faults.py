"""The results store's faults never lose a measurement and never end in a traceback: a locked file is
tried again after the level is printed, and a damaged row is one line naming it (issue 18, B12)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sim_fixtures import EP8, sim_host_config

from console.cli import main
from console.config import demo_config_path, load_config
from console.ops.explore import results_store
from console.ops.explore.probe import probe_service
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.sweep import Explore
from console.ops.state_db import AuditError

LEVEL = ProbeOptions(concurrency=(1,), num_prompts=1, input_len=8, output_len=4, warmup=0)


@pytest.fixture
def quick_lock_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy timeout and retries of a few tenths of a second instead of 10 s and 1 + 2 s."""
    monkeypatch.setattr("console.ops.state_db.BUSY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(results_store, "WRITE_RETRY_WAITS_S", (0.05, 0.05), raising=False)


def hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another console in the middle of a long write: it holds the file's write lock until commit."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")
    return other


async def test_a_locked_store_prints_the_level_first_then_fails_in_one_line(ep8_up, sim_hosts, quick_lock_waits) -> None:
    host = await ep8_up(sim_host_config(layout_specs=(EP8,)))
    store = ResultsStore(sim_hosts.state_root / "audit.sqlite3")
    other = hold_write_lock(store.path)
    printed = []
    try:
        with pytest.raises(AuditError) as err:
            await probe_service(host, host.config.services[0], LEVEL, store=store, on_result=printed.append)
    finally:
        other.rollback()
        other.close()
    assert len(printed) == 1 and printed[0].summary.completed == 1  # the operator saw the level
    assert str(err.value) == (f"results store {store.path}: still locked by another writer after 3 tries; "
                              "this result was not stored")
    assert store.probes() == []
    store.close()


def test_a_write_that_finds_the_file_locked_is_tried_again(tmp_path: Path, quick_lock_waits,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_store, "WRITE_RETRY_WAITS_S", (0.5,), raising=False)
    store = ResultsStore(tmp_path / "audit.sqlite3")
    other = hold_write_lock(store.path)
    threading.Timer(0.2, other.commit).start()  # the other writer finishes while we wait
    try:
        explore_id = store.begin_explore("h", "s", {"layouts": ["EP8"]}, None)
    finally:
        other.close()
    assert store.explore(explore_id) is not None
    store.close()


def _damage(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql, params)
    db.close()


PROBE_ROW = ("INSERT INTO probe_results (taken_at, host, service, layout, engine, model, params_json, result_json)"
             " VALUES (?, ?, ?, 'EP8', 'sglang', 'm', ?, ?)")


@pytest.mark.parametrize("taken_at, params, result, column, why", [
    (1.0, "{}", '{"concurrency": 1, "output_throughput"', "result_json", "not JSON"),
    (1.0, "[1, 2]", "{}", "params_json", "not a JSON object"),
    ("yesterday", "{}", "{}", "taken_at", "not a number"),
])
def test_results_names_a_damaged_row_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], taken_at: object,
                                                 params: str, result: str, column: str, why: str) -> None:
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    store = ResultsStore(tmp_path / "audit.sqlite3")
    store.close()
    demo = load_config(demo_config_path()).hosts[0]  # a row of the demo's service: `results` reads it
    _damage(store.path, PROBE_ROW, taken_at, demo.name, demo.services[0].name, params, result)
    code = main(["--config", str(demo_config_path()), "results", "--host", demo.name])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"probe_results row id=1: {column} is damaged ({why}); delete that row" in err


@pytest.mark.parametrize("params, why", [
    ('{"layouts": ["EP8"], "probe"', "not JSON"),
    ('{"layouts": ["EP8"]}', "its parameters cannot be read: KeyError 'probe'"),
    ('{"layouts": 8, "probe": {}}', "its parameters cannot be read: TypeError"),
])
async def test_explore_resume_names_damaged_parameters_in_one_line(sim_hosts, params: str, why: str) -> None:
    host = sim_hosts(sim_host_config(layout_specs=(EP8,)))
    audit = sim_hosts.audit()
    store = ResultsStore.beside(audit)
    _damage(store.path, "INSERT INTO explores (started_at, host, service, params_json, state)"
                        " VALUES (1.0, ?, ?, ?, 'interrupted')", host.name, host.config.services[0].name, params)
    explore = Explore(host, host.config.services[0], audit=audit, store=store)
    with pytest.raises(AuditError) as err:
        await explore.run(resume=True)
    store.close()
    assert f"explores row id=1: params_json is damaged ({why}" in str(err.value)
    assert "\n" not in str(err.value) and "DELETE FROM explores WHERE id=1" in str(err.value)

