"""The simulated host's process manager: systemd's behaviour over local processes."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from sim_fixtures import fake_engine, live, sim_host_config, wait_until
from waiting import await_for

from console.errors import HostError
from console.sim.host.procman import ProcessManager

UNIT = "sim-k26@ep8.service"

PRINT_AND_FAIL = """
import sys, time
print("ARGS", " ".join(sys.argv[1:]), flush=True)
for i in range(3):
    print("line", i, flush=True)
    time.sleep(0.02)  # deliberate: an engine that writes a few lines over time, then fails
print("Traceback (most recent call last):", file=sys.stderr, flush=True)
sys.exit(1)
"""

STUBBORN = """
import signal, subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
print("child", child.pid, flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(0.05)  # deliberate: an engine that ignores SIGTERM and lives on
"""


async def entries(pm, unit, **kw):
    return [e async for e in pm.journal(unit, follow=False, **kw)]


async def wait_state(pm, unit, active, timeout_s=30.0):
    async def reached():
        state = await pm.state(unit)
        return state if state.active == active else None

    return await await_for(reached, f"{unit} to become {active}", timeout_s=timeout_s)


async def test_a_failing_unit_reports_systemd_lines_and_state(tmp_path, monkeypatch):
    fake_engine(monkeypatch, PRINT_AND_FAIL)
    pm = ProcessManager(sim_host_config(), tmp_path)
    assert (await pm.state(UNIT)).active == "inactive"
    assert (await pm.state("nope.service")).load == "not-found"
    await pm.start(UNIT)
    state = await wait_state(pm, UNIT, "failed")
    assert (state.sub, state.result, state.exec_main_status) == ("failed", "exit-code", 1)
    messages = [e.message for e in await entries(pm, UNIT)]
    assert messages[0].startswith("Starting k26 EP8") and messages[1].startswith("Started k26 EP8")
    assert "ARGS --tp-size 8 --ep-size 8" in messages
    assert messages[-2:] == [
        f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
        f"{UNIT}: Failed with result 'exit-code'.",
    ]
    await pm.reset_failed(UNIT)
    assert (await pm.state(UNIT)).active == "inactive"


async def test_stop_kills_the_whole_group_after_the_grace_period(tmp_path, monkeypatch):
    fake_engine(monkeypatch, STUBBORN)
    pm = ProcessManager(sim_host_config(), tmp_path, stop_grace_s=0.5)
    await pm.start(UNIT)
    state = await wait_state(pm, UNIT, "active")

    async def child_line():
        return [e.message for e in await entries(pm, UNIT) if e.message.startswith("child ")]

    child = int((await await_for(child_line, "the engine's line naming its child"))[0].split()[1])
    assert live(child) and live(state.main_pid)
    await pm.stop(UNIT)
    assert wait_until(lambda: not live(child) and not live(state.main_pid), 5.0)
    assert pm.running_pids(UNIT) == []
    messages = [e.message for e in await entries(pm, UNIT)]
    assert f"{UNIT}: State 'stop-sigterm' timed out. Killing." in messages
    assert messages[-1] == "Stopped k26 EP8 (simulated sglang)."


async def test_a_clean_stop_deactivates_successfully(tmp_path, monkeypatch):
    fake_engine(monkeypatch, "import time\nprint('up', flush=True)\ntime.sleep(60)\n")  # deliberate: up until stopped
    pm = ProcessManager(sim_host_config(), tmp_path)
    await pm.start(UNIT)
    await pm.start(UNIT)  # starting an active unit does nothing, as with systemctl
    main_pid = (await wait_state(pm, UNIT, "active")).main_pid
    await pm.stop(UNIT)
    state = await pm.state(UNIT)
    assert (state.active, state.sub, state.result) == ("inactive", "dead", "success")
    assert not live(main_pid)
    tail = [e.message for e in await entries(pm, UNIT, lines=3)]
    assert tail == [
        "Stopping k26 EP8 (simulated sglang)...",
        f"{UNIT}: Deactivated successfully.",
        "Stopped k26 EP8 (simulated sglang).",
    ]


async def test_killing_the_supervisor_takes_the_engine_with_it(tmp_path, monkeypatch):
    fake_engine(monkeypatch, "import time\ntime.sleep(60)\n")  # deliberate: an engine that stays up
    pm = ProcessManager(sim_host_config(), tmp_path)
    await pm.start(UNIT)
    main_pid = (await wait_state(pm, UNIT, "active")).main_pid
    raw = (tmp_path / "hosts/sim1/units" / UNIT / "state.json").read_text()
    import json

    os.kill(json.loads(raw)["supervisor_pid"], signal.SIGKILL)
    assert wait_until(lambda: not live(main_pid), 5.0)
    state = await pm.state(UNIT)
    assert (state.active, state.result) == ("failed", "signal")


async def test_journal_resumes_after_a_cursor_without_loss_or_repeat(tmp_path, monkeypatch):
    fake_engine(monkeypatch, "for i in range(2000):\n    print('n', i)\n")
    pm = ProcessManager(sim_host_config(), tmp_path)
    await pm.start(UNIT)
    await wait_state(pm, UNIT, "inactive")
    everything = await entries(pm, UNIT)
    got, cursor = [], None
    while True:  # read in small bites, each a fresh stream resumed from the last cursor
        batch = []
        async for entry in pm.journal(UNIT, after_cursor=cursor, follow=False):
            batch.append(entry)
            if len(batch) == 137:
                break
        if not batch:
            break
        got += batch
        cursor = batch[-1].cursor
    assert [e.cursor for e in got] == [e.cursor for e in everything]
    assert [e.message for e in everything if e.source == "unit"] == [f"n {i}" for i in range(2000)]
    assert [e.message for e in await entries(pm, UNIT, lines=2)] == [e.message for e in everything[-2:]]
    with pytest.raises(HostError):
        pm.journal(UNIT, after_cursor="s=garbage")


async def test_follow_delivers_new_entries_as_they_are_written(tmp_path, monkeypatch):
    fake_engine(
        monkeypatch,
        "import time\nfor i in range(5):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n",  # deliberate: lines over time
    )
    pm = ProcessManager(sim_host_config(), tmp_path)
    seen = []

    async def follow():
        async for entry in pm.journal(UNIT, follow=True):
            seen.append(entry)
            if entry.message.endswith("Deactivated successfully."):
                return

    task = asyncio.create_task(follow())
    await pm.start(UNIT)
    await asyncio.wait_for(task, 10)
    ticks = [e for e in seen if e.message.startswith("tick")]
    assert [e.message for e in ticks] == [f"tick {i}" for i in range(5)]


async def test_env_file_and_drop_in_mappings_read_what_the_console_wrote(tmp_path, monkeypatch):
    fake_engine(monkeypatch, PRINT_AND_FAIL)
    env_pm = ProcessManager(sim_host_config("envhost", mapping="env-file"), tmp_path)
    with pytest.raises(HostError, match="environment file"):
        await env_pm.start("sim-k26.service")
    await env_pm.write_file(
        "/etc/serve-console/sim-k26.env", "# x\nSERVE_CONSOLE_LAYOUT_ARGS=--tp-size 4 --ep-size 2\n"
    )
    await env_pm.start("sim-k26.service")
    await wait_state(env_pm, "sim-k26.service", "failed")
    assert "ARGS --tp-size 4 --ep-size 2" in [e.message for e in await entries(env_pm, "sim-k26.service")]

    drop_pm = ProcessManager(sim_host_config("drophost", mapping="drop-in"), tmp_path)
    await drop_pm.write_file(
        "/etc/systemd/system/sim-k26.service.d/50-serve-console-layout.conf",
        '[Service]\nEnvironment="SERVE_CONSOLE_LAYOUT=TP8" "SERVE_CONSOLE_LAYOUT_ARGS=--tp-size 8"\n',
    )
    with pytest.raises(HostError, match="SERVE_CONSOLE_LAYOUT_ARGS"):
        await drop_pm.start("sim-k26.service")  # not loaded before daemon-reload, as with systemd
    await drop_pm.daemon_reload()
    await drop_pm.start("sim-k26.service")
    await wait_state(drop_pm, "sim-k26.service", "failed")
    assert "ARGS --tp-size 8" in [e.message for e in await entries(drop_pm, "sim-k26.service")]
