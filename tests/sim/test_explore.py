"""Explore on a simulated host shaped like the demo (8x 96 GB, Kimi K2.6): the story's table, the OOM
layout skipped or failed and rolled back, Ctrl-C leaving one ready engine, resume, the lock."""

from __future__ import annotations

import asyncio

import pytest
from sim_fixtures import EP8, TP4EP2, TP8, engine_pids, sim_host_config
from waiting import await_for

from console.domain.layout import Layout
from console.ops.explore.probe import ProbeResult
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.report import ExploreOptions, LayoutDone
from console.ops.explore.results_report import service_results
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.results_table import Pick
from console.ops.explore.sweep import Explore, ExploreRefused, explore_lock_name
from console.ops.switch.events import StepEvent

PP8 = ("PP8", Layout(pp=8))
SEED_C1 = {"TP8": 26.3, "PP8": 36.9, "EP8": 65.3}
# 40 tokens: the end of the stream (usage chunk, [DONE]) then weighs little in TPOT = (E2E - TTFT) / 39
PROBE = ProbeOptions(concurrency=(1, 8), num_prompts=3, input_len=16, output_len=40, warmup=0)


def demo_like(sim_hosts):
    return sim_hosts(sim_host_config(layout_specs=(TP8, PP8, EP8, TP4EP2)))


def explorer(sim_hosts, host, events, progress=None):
    """An explore of the host's service; each event into `events`, each probe request done into `progress`."""
    audit = sim_hosts.audit()
    store = ResultsStore.beside(audit)
    on_progress = None if progress is None else (lambda *done: progress.append(done))
    return Explore(host, host.config.services[0], audit=audit, store=store, on_event=events.append,
                   on_progress=on_progress), store


def engines(state_root) -> list[int]:
    """The simulated engines themselves (engine_pids also lists their supervisors)."""
    found = []
    for pid in engine_pids(state_root):
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
        if b"console.sim.systemd.supervisor" not in argv:
            found.append(pid)
    return found


async def assert_one_ready_engine(sim_hosts, host, layout: str) -> None:
    assert len(engines(sim_hosts.state_root)) == 1
    sample = await host.probes["k26"].probe()
    assert sample.status == "ready"
    running = [s.unit for s in await asyncio.gather(*(host.services.state(u) for u in
               [host.config.services[0].unit_for(lc) for lc in host.config.services[0].layouts])) if s.is_running]
    assert running == [host.config.services[0].unit_for(host.config.services[0].layout(layout))]


async def test_explore_reproduces_the_seeds_table_and_skips_the_oom_layout(sim_hosts):
    host = demo_like(sim_hosts)
    events: list = []
    run, store = explorer(sim_hosts, host, events)
    result = await run.run(ExploreOptions(("TP8", "PP8", "EP8", "TP4 EP2"), PROBE))
    outcomes = {r.layout: r.outcome for r in result.layouts}
    assert outcomes == {"TP8": "measured", "PP8": "measured", "EP8": "measured", "TP4 EP2": "skipped"}
    skipped = result.layouts[3]
    assert skipped.fit["verdict"] == "oom" and skipped.probes == () and skipped.switch_s == 0.0
    for report in result.layouts[:3]:
        c1 = next(p for p in report.probes if p["concurrency"] == 1)
        assert c1["per_user_tokens_per_s"] == pytest.approx(SEED_C1[report.layout], rel=0.03)
        assert [p["concurrency"] for p in report.probes] == [1, 8]
    assert result.best == "EP8" and result.left_running == "EP8" and not result.interrupted
    line = result.to_json()
    assert line["event"] == "explore" and line["best"] == "EP8" and line["left_running"] == "EP8"
    assert [lay["outcome"] for lay in line["layouts"]] == ["measured"] * 3 + ["skipped"]
    assert {"layout", "outcome", "fit", "failure", "probes"} <= set(line["layouts"][0])
    # The events: switch events, probe levels with their layout, one LayoutDone per layout.
    assert [e.report.layout for e in events if isinstance(e, LayoutDone)] == list(outcomes)
    assert {e.layout for e in events if isinstance(e, ProbeResult)} == {"TP8", "PP8", "EP8"}
    assert any(isinstance(e, StepEvent) and e.layout == "PP8" and e.step == "start" for e in events)
    # The history holds it: `results` ranks the same best, and its frontier includes EP8 at c=1.
    res = service_results(store, host.config, host.config.services[0])
    assert res.best == "EP8" and {r.layout: r.outcome for r in res.rows}["TP4 EP2"] == "skipped"
    assert any(p.layout == "EP8" and p.concurrency == 1 for p in res.pareto)
    await assert_one_ready_engine(sim_hosts, host, "EP8")


async def test_with_include_oom_the_oom_layout_fails_with_its_card_and_rolls_back(sim_hosts):
    host = demo_like(sim_hosts)
    events: list = []
    run, _store = explorer(sim_hosts, host, events)
    result = await run.run(ExploreOptions(("EP8", "TP4 EP2"), PROBE, include_oom=True))
    ep8, tp4ep2 = result.layouts
    assert ep8.outcome == "measured" and tp4ep2.outcome == "failed"
    assert tp4ep2.failure["kind"] == "cuda_oom" and tp4ep2.failure["tried_bytes"] == 672 * 2**20
    assert tp4ep2.failure["rollback"] == {"layout": "EP8", "outcome": "ready"}
    assert result.best == "EP8" and result.left_running == "EP8"
    await assert_one_ready_engine(sim_hosts, host, "EP8")


async def test_cancel_while_a_layout_starts_goes_back_to_the_last_good_one_and_resume_goes_on(sim_hosts):
    host = demo_like(sim_hosts)
    events: list = []
    run, store = explorer(sim_hosts, host, events)
    task = asyncio.create_task(run.run(ExploreOptions(("EP8", "TP8", "PP8"), PROBE, pick=Pick("c1"))))
    await await_for(lambda: any(isinstance(e, StepEvent) and e.layout == "TP8" and e.step == "start" for e in events),
                    "TP8's start step")
    task.cancel()
    result = await task
    assert result.interrupted and [r.layout for r in result.layouts] == ["EP8"]
    assert result.left_running == "EP8"
    await assert_one_ready_engine(sim_hosts, host, "EP8")
    assert store.unfinished_explore("sim1", "k26").state == "interrupted"

    events.clear()
    again, store = explorer(sim_hosts, host, events)
    resumed = await again.run(resume=True)
    assert resumed.explore_id == result.explore_id and not resumed.interrupted
    assert [(r.layout, r.outcome) for r in resumed.layouts] == [("EP8", "measured"), ("TP8", "measured"),
                                                                ("PP8", "measured")]
    assert not any(isinstance(e, ProbeResult) and e.layout == "EP8" for e in events)  # not probed again
    assert resumed.best == "EP8" and resumed.left_running == "EP8" and str(resumed.pick) == "c1"
    assert store.unfinished_explore("sim1", "k26") is None


async def test_cancel_mid_probe_leaves_the_layout_it_was_on(sim_hosts):
    host = sim_hosts(layout_specs=(EP8, TP8))
    events: list = []
    progress: list = []
    run, _store = explorer(sim_hosts, host, events, progress)
    slow = ProbeOptions(concurrency=(1,), num_prompts=50, output_len=50, warmup=0)
    task = asyncio.create_task(run.run(ExploreOptions(("TP8", "EP8"), slow)))
    await await_for(lambda: progress, "the probe's first request on TP8", timeout_s=60)
    assert not task.done() and len(progress) < 50  # mid-probe: 50 prompts of 50 tokens are far from done
    task.cancel()
    result = await task
    assert result.interrupted and result.layouts == () and result.left_running == "TP8"
    await assert_one_ready_engine(sim_hosts, host, "TP8")


async def test_two_explores_of_one_service_exclude_each_other(sim_hosts):
    host = sim_hosts(layout_specs=(EP8,))
    run, _store = explorer(sim_hosts, host, [])
    async with host.lock(explore_lock_name(host.config.services[0])):
        with pytest.raises(ExploreRefused, match="another explore"):
            await run.run(ExploreOptions(("EP8",), PROBE))
    with pytest.raises(ExploreRefused, match="no unfinished explore"):
        await run.run(resume=True)


async def test_a_layout_that_is_not_ready_in_time_is_a_timeout(sim_hosts):
    host = sim_hosts(layout_specs=(EP8,))
    run, _store = explorer(sim_hosts, host, [])
    result = await run.run(ExploreOptions(("EP8",), PROBE, switch_timeout_s=0.3))
    (report,) = result.layouts
    assert report.outcome == "timeout" and report.probes == () and report.failure["summary"]
    assert result.best is None and result.measured == 0
