"""The packaged demo reserves its ports for as long as it runs; a busy or reserved one moves, and says so."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from console.config import demo_config_path, load_config
from console.sim.demo_cluster import PORT_LOCK_DIR_ENV, load_demo_config, release_demo_ports


@pytest.fixture(autouse=True)
def own_lock_dir(tmp_path, monkeypatch):
    """Locks apart from any demo running on this machine; every reservation given back after."""
    monkeypatch.setenv(PORT_LOCK_DIR_ENV, str(tmp_path / "locks"))
    yield
    release_demo_ports()


def _packaged() -> tuple[str, int]:
    url = urlsplit(load_config(demo_config_path()).hosts[0].services[0].url)
    return url.hostname, url.port


def kimi_notes(notes: list[str]) -> list[str]:
    """The notes about the Kimi service (the packaged demo may have other hosts, each with its port)."""
    return [n for n in notes if n.startswith("demo/kimi-k2.6:")]


def _port(config) -> int:
    return urlsplit(config.hosts[0].services[0].url).port


def test_busy_demo_port_moves_to_a_free_one() -> None:
    address, port = _packaged()
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is not held
        with contextlib.suppress(OSError):  # already held by another program: the point of the feature
            holder.bind((address, port))
            holder.listen()
        config, notes = load_demo_config()
        moved = urlsplit(config.hosts[0].services[0].url)
        assert moved.hostname == address and moved.port != port
        (note,) = kimi_notes(notes)
        assert f"port {port} is in use" in note
        with socket.socket() as probe:  # the new port is really free (TIME_WAIT of an earlier test is not held)
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((moved.hostname, moved.port))


def test_a_busy_port_the_demos_own_engine_holds_is_kept() -> None:
    address, port = _packaged()
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):
            holder.bind((address, port))
            holder.listen()
        seen = []
        config, notes = load_demo_config(owns_busy_port=lambda h, s: seen.append((h.name, s.name)) or True)
    assert (_port(config), kimi_notes(notes)) == (port, [])
    assert ("demo", "kimi-k2.6") in seen


_HOLDER = """
import sys
from urllib.parse import urlsplit
from console.sim.demo_cluster import load_demo_config
config, _ = load_demo_config()
print(urlsplit(config.hosts[0].services[0].url).port, flush=True)
sys.stdin.readline()
"""


def test_a_port_another_demo_reserved_is_never_taken_even_while_nothing_listens(tmp_path: Path) -> None:
    # The first demo is between stopping one engine and the next binding: its port looks free.
    first = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        first_port = int(first.stdout.readline())
        _, port = _packaged()
        config, notes = load_demo_config()
        assert _port(config) != first_port
        if first_port == port:
            (note,) = kimi_notes(notes)
            assert f"port {port} is another demo's on this machine" in note
        with socket.socket() as probe:
            # Nobody listens there: the reservation did it. SO_REUSEADDR, since an engine of an earlier
            # test may have left the port in TIME_WAIT (a listener would still refuse the bind).
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", first_port))
    finally:
        first.communicate("\n", timeout=30)
    release_demo_ports()
    again, _ = load_demo_config()  # once the first demo has gone, its port is free to take again
    assert _port(again) == first_port


def test_the_demo_that_kept_the_packaged_ports_shares_the_users_state(monkeypatch) -> None:
    from console.hosts.state_dir import STATE_DIR_ENV
    from console.ui.tui_entry import demo_state_root

    monkeypatch.delenv(STATE_DIR_ENV)
    packaged = load_config(demo_config_path())
    service = dataclasses.replace(packaged.hosts[0].services[0], url="http://127.0.0.1:30001")
    moved = dataclasses.replace(packaged, hosts=(dataclasses.replace(packaged.hosts[0], services=(service,)),))
    with contextlib.ExitStack() as stack:
        assert demo_state_root(packaged, stack) is None  # the user's state dir, as hosts.toml's demo host
        apart = demo_state_root(moved, stack)
        assert apart is not None and apart.is_dir() and apart.name.startswith("serve-console-demo-")


def test_a_switch_from_another_state_dir_is_refused_a_port_the_demo_reserved(tmp_path) -> None:
    """Issue 30, D12: while the demo's engine is stopped for a switch its port looks free; a headless
    `switch` on another state dir must not take it (the demo's rollback would die on `address already in
    use`): it is refused in one line naming the demo. A console on the demo's own state dir may start it."""
    import os

    from sim_cli import cli, sim_toml

    from console.factory import open_hosts

    config, _ = load_demo_config()  # this process is the demo: it holds its ports' reservations
    demo_state = tmp_path / "demo-state"
    port = _port(config)
    hosts = open_hosts(config, state_dir=demo_state)  # the demo's hosts say where its units live
    (tmp_path / "hosts.toml").write_text(sim_toml(port))  # another config naming the same port
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "other-state"),
               SERVE_CONSOLE_PORT_LOCK_DIR=os.environ[PORT_LOCK_DIR_ENV], SERVE_CONSOLE_SIM_TIME_SCALE="0.02")
    try:
        done = cli(tmp_path, env, "--config", "hosts.toml", "switch", "EP8", "--host", "sim1", "--no-rollback")
    finally:  # should it have started (the bug), its engine is stopped
        cli(tmp_path, env, "--config", "hosts.toml", "stop", "--host", "sim1")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert f"port {port} is reserved by the demo running as pid {os.getpid()}" in out, out
    assert "Traceback" not in out
    code = ("import sys; from pathlib import Path; from console.sim.demo_cluster import reserved_elsewhere; "
            f"print(reserved_elsewhere({port}, Path(sys.argv[1])))")  # fmt: skip
    same = subprocess.run([sys.executable, "-c", code, str(demo_state)], env=env, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert same.stdout.strip() == "None", same.stdout + same.stderr
    for host in hosts:
        asyncio.run(host.close())
