"""The simulated systemd's `Restart=` and `RestartSec=`, read from a drop-in at daemon-reload, as systemd does."""

from __future__ import annotations

from sim_fixtures import fake_engine, sim_host_config
from waiting import await_for

from console.sim.host.procman import ProcessManager
from console.sim.systemd.unit_file import RestartPolicy, parse_time_span, restart_settings

UNIT = "sim-k26@ep8.service"
DIES = "import sys; print('boom', flush=True); sys.exit(3)"
EXITS_CLEAN = "print('done', flush=True)"


async def with_drop_in(pm: ProcessManager, text: str, folder: str = "sim-k26@.service.d") -> None:
    await pm.write_file(f"/etc/systemd/system/{folder}/restart.conf", text)
    await pm.daemon_reload()


async def until_restarts(pm: ProcessManager, n: int, timeout_s: float = 30.0):
    async def restarted():
        state = await pm.state(UNIT)
        return state if (state.n_restarts or 0) >= n else None

    return await await_for(restarted, f"{n} restarts of {UNIT}", timeout_s=timeout_s)


async def until_ended(pm: ProcessManager):
    """The unit's state once its main process has ended for good: a restart would be `auto-restart` instead."""
    async def ended():
        state = await pm.state(UNIT)
        return state if state.active in ("inactive", "failed") and state.result is not None else None

    return await await_for(ended, f"{UNIT}'s engine to end without a restart pending")


def test_the_drop_in_keys_are_read_as_systemd_reads_them():
    assert parse_time_span("100ms") == 0.1 and parse_time_span("2") == 2.0 and parse_time_span("1min") == 60.0
    assert parse_time_span("soon") is None
    assert restart_settings(["[Service]\nRestart=always\nRestartSec=0.5\n", "[Service]\nRestartSec=2s\n"]) == \
        RestartPolicy("always", 2.0)
    assert restart_settings(["Restart=sometimes\nRestartSec=x\n"]) == RestartPolicy()


async def test_a_unit_that_dies_every_time_is_restarted_and_counted(tmp_path, monkeypatch):
    fake_engine(monkeypatch, DIES)
    pm = ProcessManager(sim_host_config(), tmp_path)
    await with_drop_in(pm, "[Service]\nRestart=always\nRestartSec=0.1\n")
    await pm.start(UNIT)
    await until_restarts(pm, 3)
    messages = [e.message async for e in pm.journal(UNIT, follow=False) if e.source == "systemd"]
    assert messages[:6] == [
        "Starting k26 EP8 (simulated sglang)...", "Started k26 EP8 (simulated sglang).",
        f"{UNIT}: Main process exited, code=exited, status=3/FAILURE", f"{UNIT}: Failed with result 'exit-code'.",
        f"{UNIT}: Scheduled restart job, restart counter is at 1.", "Stopped k26 EP8 (simulated sglang).",
    ]
    assert f"{UNIT}: Scheduled restart job, restart counter is at 3." in messages
    await pm.stop(UNIT)  # ends the loop wherever it is: running, or waiting out RestartSec
    state = await pm.state(UNIT)
    assert not state.is_running and state.active in ("failed", "inactive")
    assert pm.running_pids(UNIT) == []


async def test_between_restarts_the_unit_waits_in_auto_restart(tmp_path, monkeypatch):
    fake_engine(monkeypatch, DIES)
    pm = ProcessManager(sim_host_config(), tmp_path)
    await with_drop_in(pm, "[Service]\nRestart=on-failure\nRestartSec=1\n", folder=f"{UNIT}.d")
    await pm.start(UNIT)

    async def waiting_to_restart():
        state = await pm.state(UNIT)
        return (state.active, state.sub) == ("activating", "auto-restart")

    await await_for(waiting_to_restart, f"{UNIT} in activating/auto-restart")
    assert (await pm.state(UNIT)).result == "exit-code"
    await pm.stop(UNIT)


async def test_without_a_drop_in_or_on_a_clean_exit_under_on_failure_there_is_no_restart(tmp_path, monkeypatch):
    fake_engine(monkeypatch, EXITS_CLEAN)
    pm = ProcessManager(sim_host_config(), tmp_path)
    await with_drop_in(pm, "[Service]\nRestart=on-failure\nRestartSec=0.1\n")
    await pm.start(UNIT)
    state = await until_ended(pm)
    assert (state.active, state.n_restarts) == ("inactive", 0)
    fake_engine(monkeypatch, DIES)
    other = ProcessManager(sim_host_config(), tmp_path / "plain")
    await other.start(UNIT)
    state = await until_ended(other)
    assert (state.active, state.n_restarts) == ("failed", 0)
