"""Words of a switch that must not mislead in an incident (issue 30, B8): a failed layout that was itself
the last one ready says so instead of "no layout is known to have been ready"; `history` does not call a
rollback forced; `switch TP6` with no host that has TP6 names the layout, not the missing --host."""

from __future__ import annotations

import argparse

import pytest
from sim_fixtures import EP8, TP8, sim_host_config

from console.commands.host_args import pick_host_for_layout
from console.config import demo_config_path, load_config
from console.errors import UsageError
from console.ops.audit import AuditLog
from console.ops.switch import FAILED, StepEvent, SwitchResult


async def test_a_failed_layout_that_was_the_only_ready_one_is_named_as_such(tmp_path, sim_hosts) -> None:
    from console.ops.switch.orchestrate import _Switch

    host = sim_hosts(sim_host_config(layout_specs=(EP8, TP8)))
    service = host.config.services[0]
    audit = AuditLog(tmp_path / "audit.sqlite3")
    ready = audit.begin(host=host.name, service=service.name, to_layout="EP8")
    audit.finish(ready, outcome="ready")
    events: list = []
    run = _Switch(host, service, audit, events.append, 60.0, 0.1, 0.5)
    failed = SwitchResult(host=host.name, service=service.name, layout="EP8", outcome=FAILED, reason="CUDA OOM")
    assert await run.roll_back(failed, from_layout="EP8") is failed
    (note,) = [e.detail for e in events if isinstance(e, StepEvent) and e.step == "rollback"]
    assert note.startswith("the only layout known to have been ready is EP8, the one that just failed"), note
    audit.close()


def test_history_does_not_call_a_rollback_forced(tmp_path, monkeypatch, capsys) -> None:
    from console.commands import history

    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    from console.ops.audit import open_audit

    audit = open_audit(tmp_path)
    first = audit.begin(host="demo", service="k26", to_layout="TP4 EP2", from_layout="EP8", forced=True)
    audit.finish(first, outcome="failed", reason="CUDA OOM")
    back = audit.begin(host="demo", service="k26", to_layout="EP8", from_layout="TP4 EP2", forced=True,
                       rollback_of=first)  # fmt: skip
    audit.finish(back, outcome="ready")
    audit.close()
    history.run(argparse.Namespace(n=10, host=None, json=False, web=False))
    lines = capsys.readouterr().out.splitlines()
    forced = [line for line in lines if "TP4 EP2 -> EP8" in line]
    assert forced and " forced" not in forced[0] and f"rollback of #{first}" in forced[0], lines
    assert any("EP8 -> TP4 EP2 forced" in line for line in lines), lines  # the operator's own stays forced


def test_a_layout_no_host_has_is_named_without_host() -> None:
    config = load_config(demo_config_path())
    assert len(config.hosts) > 1
    with pytest.raises(UsageError, match="no host has a layout 'TP6'") as caught:
        pick_host_for_layout(config, None, "TP6")
    assert "several hosts" not in str(caught.value)
    assert pick_host_for_layout(config, None, "EP8").name == "demo"
