"""The switch as the TUI has it: the ready layout is left alone unless restarted; refusals name what ran."""

from __future__ import annotations

import pytest
from headless_cli import cli, demo_env, json_lines  # noqa: F401 (demo_env is a fixture)

from console.commands.switch_output import verdict_lines
from console.hosts.base import LockBusy
from console.ops.switch.orchestrate import switch_layout


async def test_switching_to_the_ready_layout_is_a_no_op_unless_restarted(sim_hosts):
    host = sim_hosts()
    audit = sim_hosts.audit()
    assert (await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)).outcome == "ready"
    pid = (await host.services.state("sim-k26@ep8.service")).main_pid
    events = []
    same = await switch_layout(
        host, None, "EP8", audit=audit, timeout_s=60, restart_ready=False, on_event=events.append
    )
    assert same.outcome == "unchanged" and same.from_layout == "EP8"
    assert "already running and ready" in same.reason and "--restart" in same.reason
    assert verdict_lines(same) == [f"UNCHANGED: {same.reason}"]
    assert (await host.services.state("sim-k26@ep8.service")).main_pid == pid
    assert [e.to_layout for e in audit.entries()] == ["EP8"]  # nothing happened, nothing recorded
    restarted = await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)
    assert restarted.outcome == "ready"
    assert (await host.services.state("sim-k26@ep8.service")).main_pid != pid


async def test_another_layout_still_switches_without_restart(ep8_up, sim_hosts):
    host = await ep8_up()
    other = await switch_layout(host, None, "TP8", timeout_s=60, restart_ready=False)
    assert (other.outcome, other.from_layout) == ("ready", "EP8")


async def test_a_refused_switch_records_the_layout_that_runs(sim_hosts):
    host = sim_hosts()
    audit = sim_hosts.audit()
    assert (await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)).outcome == "ready"
    refused = await switch_layout(host, None, "TP4 EP2", audit=audit)  # predicted oom
    assert (refused.outcome, refused.from_layout) == ("refused", "EP8")
    assert refused.to_json()["from_layout"] == "EP8"
    assert [(e.from_layout, e.to_layout, e.outcome) for e in audit.entries()][-1] == ("EP8", "TP4 EP2", "refused")


async def test_a_switch_refused_by_the_lock_records_the_layout_that_runs(sim_hosts, monkeypatch):
    host = sim_hosts()
    audit = sim_hosts.audit()
    assert (await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)).outcome == "ready"

    def busy(_name):
        raise LockBusy("held by pid 1")

    monkeypatch.setattr(host, "lock", busy)
    refused = await switch_layout(host, None, "TP8", audit=audit)
    assert (refused.outcome, refused.from_layout) == ("refused", "EP8") and "another switch" in refused.reason
    assert audit.entries()[-1].from_layout == "EP8"


def test_cli_switch_to_the_ready_layout_exits_0_and_says_so(demo_env):  # noqa: F811

    cwd, env = demo_env
    assert cli(cwd, env, "switch", "EP8").returncode == 0
    again = cli(cwd, env, "switch", "EP8")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1].startswith("UNCHANGED: EP8 is already running and ready")
    result = json_lines(cli(cwd, env, "switch", "EP8", "--json").stdout)[-1]
    assert (result["outcome"], result["from_layout"]) == ("unchanged", "EP8")
    restarted = json_lines(cli(cwd, env, "switch", "EP8", "--restart", "--json").stdout)[-1]
    assert restarted["outcome"] == "ready"


@pytest.mark.parametrize("unit", ["nope.service", "sglang-k26@nope.service"])
def test_tail_of_a_unit_that_is_not_there_is_one_line_and_exit_1(demo_env, unit):  # noqa: F811
    cwd, env = demo_env
    proc = cli(cwd, env, "tail", "--host", "demo", "--unit", unit)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and f"no unit '{unit}'" in proc.stderr
    assert "sglang-k26@ep8.service" in proc.stderr  # it names the units there are
    assert cli(cwd, env, "tail", "--host", "demo", "--unit", "sglang-k26@ep8.service").returncode == 0  # is there
