"""Read-only holds for every command that changes a host; `stop` and `restart` (issue 10, item 4)."""

from __future__ import annotations

import json

import pytest
from sim_cli import HOST, cli, sim_env, sim_toml  # noqa: F401 - the fixture is used by name
from sim_fixtures import EP8, TP8, fake_engine, free_port

from console.domain.values import FindingClass
from console.ops.switch.events import FAILED, READY
from console.ops.switch.orchestrate import switch_layout
from console.ops.switch.service_control import NOTHING, STOPPED, restart_service, stop_service


def _units_ever_started(tmp_path) -> list[str]:
    units = tmp_path / "state" / "hosts" / HOST / "units"
    return sorted(p.name for p in units.iterdir() if (p / "state.json").exists()) if units.is_dir() else []


@pytest.mark.parametrize(
    "argv",
    [
        ("switch", "EP8"),
        ("--readonly", "switch", "EP8"),
        ("switch", "EP8", "--readonly"),
        ("stop", "--readonly"),
        ("--readonly", "restart"),
        ("demo", "--readonly"),
    ],
)
def test_read_only_refuses_every_changing_command_in_one_line(sim_env, argv):  # noqa: F811
    tmp_path, env = sim_env
    if "--readonly" not in argv:  # the config's readonly = true holds headless too
        config = tmp_path / "hosts.toml"
        config.write_text("[console]\nreadonly = true\n" + config.read_text())
    run = cli(tmp_path, env, *argv)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "read-only mode" in lines[0], run.stderr
    assert _units_ever_started(tmp_path) == []


def test_tui_demo_read_only_neither_starts_nor_stops_units(monkeypatch, tmp_path):
    import console.ui.app as app_module
    import console.ui.tui_entry as ui_command
    from console.cli import main
    from console.config import load_config

    seen: dict = {}

    class RecordingApp:
        def __init__(self, hosts, **kwargs):
            seen.update(kwargs)
            self.return_code = 0

        def run(self):
            return None

    monkeypatch.setattr(app_module, "ConsoleApp", RecordingApp)
    (tmp_path / "hosts.toml").write_text(sim_toml(free_port()))
    monkeypatch.setattr(ui_command, "tui_config", lambda args: (load_config(tmp_path / "hosts.toml"), []))
    monkeypatch.setattr(ui_command, "_isatty", lambda stream: True)
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    assert main(["--demo", "--readonly"]) == 0
    assert seen["readonly"] is True and seen["demo_start"] is False and seen["stop_started_units"] is False


async def test_restart_reports_ready_and_then_a_failed_restart_with_its_cause(sim_hosts, monkeypatch):
    host = sim_hosts(layout_specs=(EP8, TP8))
    service = host.config.services[0]
    assert (await restart_service(host, service)).outcome == NOTHING
    assert (await switch_layout(host, None, "TP8", timeout_s=60)).outcome == READY
    events = []
    again = await restart_service(host, service, on_event=events.append, timeout_s=60)
    assert again.outcome == READY and again.layout == "TP8" and again.unit == service.unit_for(service.layout("TP8"))
    assert any(getattr(e, "step", None) == "restart" for e in events)
    fake_engine(
        monkeypatch,
        "import sys\nprint('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
        "a total capacity of 95.00 GiB of which 1.00 GiB is free.', flush=True)\nsys.exit(1)\n",
    )
    failed = await restart_service(host, service, timeout_s=60)
    assert failed.outcome == FAILED and failed.failure is not None
    assert failed.failure.cls is FindingClass.CUDA_OOM


async def test_stop_stops_the_running_unit(sim_hosts):
    host = sim_hosts(layout_specs=(EP8, TP8))
    service = host.config.services[0]
    assert (await switch_layout(host, None, "TP8", timeout_s=60)).outcome == READY
    stopped = await stop_service(host, service)
    assert stopped.outcome == STOPPED and "not serving" in stopped.reason
    assert not (await host.services.state(stopped.unit)).is_running
    assert (await stop_service(host, service)).outcome == NOTHING


def test_stop_and_restart_commands(sim_env):  # noqa: F811
    tmp_path, env = sim_env
    assert cli(tmp_path, env, "switch", "EP8").returncode == 0
    restart = cli(tmp_path, env, "restart", "--json", timeout=180)
    assert restart.returncode == 0, restart.stdout + restart.stderr
    result = json.loads(restart.stdout.splitlines()[-1])
    assert result["event"] == "result" and result["outcome"] == "ready" and result["layout"] == "EP8"
    stop = cli(tmp_path, env, "stop")
    assert stop.returncode == 0 and "STOPPED" in stop.stdout, stop.stdout + stop.stderr
    status = json.loads(cli(tmp_path, env, "status", "--json").stdout.splitlines()[0])
    assert status["active_layout"] is None
