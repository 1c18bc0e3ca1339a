"""The layout switch on a simulated host: triaged failures, rollback, preflight, lock, state-only deaths."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from journal_fakes import LaggingJournal, LateJournal, NoJournal, SystemdLineFirst
from sim_fixtures import EP8, TP4EP2, TP8, failing, fake_engine, sim_host_config

from console.domain.values import FindingClass
from console.ops.switch.events import FindingEvent, PhaseEvent, ResultEvent
from console.ops.switch.orchestrate import switch_layout


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("nccl", FindingClass.NCCL_TIMEOUT),  # the simulated failure is a watchdog timeout
        ("port", FindingClass.PORT_IN_USE),
        ("kv", FindingClass.KV_CACHE_TOO_SMALL),
        ("cuda_graph", FindingClass.CUDA_GRAPH),
    ],
)
async def test_each_injected_failure_is_reported_with_its_triaged_cause(sim_hosts, kind, cls):
    host = sim_hosts(layout_specs=(failing("BAD", kind),))
    events = []
    result = await switch_layout(host, None, "BAD", rollback=False, timeout_s=60, on_event=events.append)
    assert result.outcome == "failed", result.reason
    assert result.failure is not None and result.failure.cls is cls
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py
    assert result.rollback is None
    assert any(isinstance(e, FindingEvent) and e.finding.cls is cls for e in events)
    assert [e for e in events if isinstance(e, ResultEvent)] == [events[-1]]


async def test_forced_oom_fails_with_the_oom_facts_and_rolls_back_to_the_last_ready_layout(sim_hosts):
    host = sim_hosts()
    audit = sim_hosts.audit()
    first = await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)
    assert first.outcome == "ready" and first.detected_after_s is not None  # how soon: bench/verdict_cases.py
    events = []
    result = await switch_layout(
        host, None, "TP4EP2", force=True, audit=audit, timeout_s=60, on_event=events.append
    )
    assert result.outcome == "failed"
    failure = result.to_json()["failure"]
    assert failure["kind"] == "cuda_oom" and failure["gpu"] is not None
    assert failure["tried_bytes"] == 672 * 2**20
    for key in ("total_bytes", "free_bytes", "in_use_bytes"):
        assert failure[key] > 0
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py
    assert (
        result.rollback is not None and result.rollback.outcome == "ready" and result.rollback.layout == "EP8"
    )
    assert any(isinstance(e, PhaseEvent) and e.rollback for e in events)
    assert (await host.services.state("sim-k26@ep8.service")).active == "active"
    assert (await host.services.state("sim-k26@tp4ep2.service")).active != "active"
    history = [(e.to_layout, e.outcome, e.rollback_of) for e in audit.entries()]
    assert history == [("EP8", "ready", None), ("TP4 EP2", "failed", None), ("EP8", "ready", result.audit_id)]


async def test_no_rollback_leaves_the_failed_layout(sim_hosts):
    host = sim_hosts()
    audit = sim_hosts.audit()
    assert (await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)).outcome == "ready"
    result = await switch_layout(host, None, "TP4 EP2", force=True, rollback=False, audit=audit, timeout_s=60)
    assert result.outcome == "failed" and result.rollback is None
    assert result.to_json()["rollback"] is None
    assert (await host.services.state("sim-k26@ep8.service")).active == "inactive"
    assert [e.to_layout for e in audit.entries()] == ["EP8", "TP4 EP2"]


async def test_a_predicted_oom_is_refused_without_touching_the_host(sim_hosts):
    host = sim_hosts()
    audit = sim_hosts.audit()
    result = await switch_layout(host, None, "TP4 EP2", audit=audit)
    assert result.outcome == "refused"
    assert "oom" in result.reason and "--force" in result.reason and "\n" not in result.reason
    assert result.detected_after_s == 0.0
    assert (await host.services.state("sim-k26@tp4ep2.service")).active == "inactive"
    assert [(e.to_layout, e.outcome) for e in audit.entries()] == [("TP4 EP2", "refused")]


async def test_a_second_switch_is_refused_while_another_process_holds_the_lock(sim_hosts, tmp_path):
    cfg = sim_host_config()
    host = sim_hosts(cfg)
    holder = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from console.sim.host.build import FileHostLock
        async def main():
            async with FileHostLock(Path({str(tmp_path / "hosts" / "sim1" / "locks")!r}))("switch-k26"):
                print("held", flush=True)
                sys.stdin.readline()
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", holder, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert (await proc.stdout.readline()).strip() == b"held"
        result = await switch_layout(host, None, "EP8")
        assert result.outcome == "refused" and "another switch" in result.reason
        assert (await host.services.state("sim-k26@ep8.service")).active == "inactive"
    finally:
        await proc.communicate(b"\n")
    assert (await switch_layout(host, None, "EP8", timeout_s=60)).outcome == "ready"


async def test_a_lagging_journal_still_names_the_oom_the_unit_state_saw_first(sim_hosts):
    host = sim_hosts()
    host.services = LaggingJournal(host.services, lag_s=0.6)
    result = await switch_layout(host, None, "TP4EP2", force=True, rollback=False, timeout_s=60, state_poll_s=0.05)
    assert result.outcome == "failed"
    assert result.failure.cls is FindingClass.CUDA_OOM, result.reason
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py


async def test_a_journal_that_starts_late_still_names_the_oom(sim_hosts, monkeypatch):
    from console.ops.switch import start_follow

    # what is tested is that the state's verdict waits for a late journal's cause; how long it may
    # wait (JOURNAL_GRACE_S, 2 s) is bench/verdict_cases.py's figure, and a loaded machine can eat 1.2 s
    monkeypatch.setattr(start_follow, "JOURNAL_GRACE_S", 30.0)
    host = sim_hosts()
    host.services = LateJournal(host.services, delay_s=0.8)
    result = await switch_layout(host, None, "TP4EP2", force=True, rollback=False, timeout_s=60, state_poll_s=0.05)
    assert result.outcome == "failed"
    assert result.failure.cls is FindingClass.CUDA_OOM, result.reason


async def test_the_oom_is_named_even_when_systemds_exit_line_comes_first(sim_hosts):
    host = sim_hosts()
    host.services = SystemdLineFirst(host.services)
    result = await switch_layout(host, None, "TP4EP2", force=True, rollback=False, timeout_s=60, state_poll_s=0.05)
    assert result.outcome == "failed"
    assert result.failure.cls is FindingClass.CUDA_OOM, result.reason
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py


async def test_a_death_the_journal_does_not_explain_is_failed_from_the_unit_state(sim_hosts, monkeypatch):
    fake_engine(monkeypatch, "import time, sys\ntime.sleep(0.3)\nsys.exit(3)\n")  # deliberate: up, then dies
    host = sim_hosts()
    host.services = NoJournal(host.services)
    result = await switch_layout(host, None, "EP8", rollback=False, timeout_s=30, state_poll_s=0.05)
    assert result.outcome == "failed"
    assert result.failure.cls is FindingClass.UNIT_FAILED
    assert "exit-code" in result.reason
    # A journal that has said nothing at all may still be starting (journalctl -f over a loaded SSH
    # link), so the state's verdict waits the whole grace for it (JOURNAL_GRACE_S; how long: the bench).
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py


async def test_an_engine_that_never_gets_ready_times_out(sim_hosts, monkeypatch):
    fake_engine(
        monkeypatch,
        "import time\nprint('Load weight begin. avail mem=94.00 GB', flush=True)\ntime.sleep(60)\n",  # deliberate: hangs
    )
    host = sim_hosts()
    result = await switch_layout(host, None, "TP8", rollback=False, timeout_s=1.0)
    assert result.outcome == "timeout" and "1 s" in result.reason


@pytest.mark.parametrize("mapping", ["env-file", "drop-in", "unit-per-layout"])
async def test_every_mapping_switches_and_reports_its_active_layout(sim_hosts, mapping):
    from console.ops.status import service_status

    host = sim_hosts(mapping=mapping, layout_specs=(EP8, TP8, TP4EP2))
    audit = sim_hosts.audit()
    result = await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)
    assert result.outcome == "ready", result.reason
    status = await service_status(host, host.config.services[0], audit=audit)
    assert status.active_layout == "EP8" and status.health.status == "ready"
    used = sum(g.used_mib or 0 for g in status.gpus.gpus)
    assert used > 8 * 60_000  # the engine's weights are in the simulated ledger


async def test_a_demo_host_stops_its_units_when_closed(tmp_path):
    from sim_fixtures import engine_pids

    from console.sim.host.build import build_sim_host

    host = build_sim_host(sim_host_config(), tmp_path, stop_units_on_close=True)
    assert (await switch_layout(host, None, "EP8", timeout_s=60)).outcome == "ready"
    assert engine_pids(tmp_path)
    await host.close()
    assert engine_pids(tmp_path) == []


async def test_a_start_the_host_refuses_is_a_failed_switch_in_one_line(sim_hosts):
    host = sim_hosts(model_config=None)
    audit = sim_hosts.audit()
    result = await switch_layout(host, None, "EP8", audit=audit, rollback=False)
    assert result.outcome == "failed" and result.failure.cls is FindingClass.UNIT_FAILED
    assert result.reason.startswith("could not start sim-k26@ep8.service") and "model_config" in result.reason
    assert [(e.to_layout, e.outcome) for e in audit.entries()] == [("EP8", "failed")]
