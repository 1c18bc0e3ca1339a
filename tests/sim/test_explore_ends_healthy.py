"""An explore never calls a dead engine measured, and always ends on a healthy layout: an engine killed
mid-probe is `failed` (never best), `--return` and an unmet pick rule end on the start layout, and a
plain probe and an explore of one service exclude each other."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sim_fixtures import EP8, TP8, kill_engine, logged, until_logged

from console.domain.values import HealthSample
from console.ops.explore.probe import ProbeRefused, probe_service
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.report import ExploreOptions
from console.ops.explore.results_report import service_results
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.results_table import Pick
from console.ops.explore.sweep import Explore, ExploreRefused, explore_lock_name
from console.ops.switch.events import ResultEvent

# Long enough (200 tokens a request) that a kill lands while the first level runs.
SLOW = ProbeOptions(concurrency=(1, 4), num_prompts=4, input_len=16, output_len=200, warmup=0)
QUICK = ProbeOptions(concurrency=(1,), num_prompts=2, input_len=16, output_len=8, warmup=0)


def explorer(sim_hosts, host, on_event=None):
    audit = sim_hosts.audit()
    store = ResultsStore.beside(audit)
    return Explore(host, host.config.services[0], audit=audit, store=store, on_event=on_event), store


async def running_ready(host) -> str | None:
    service = host.config.services[0]
    running = [lc.name for lc in service.layouts if (await host.services.state(service.unit_for(lc))).is_running]
    ready = (await host.probes[service.name].probe()).status == "ready"
    return running[0] if len(running) == 1 and ready else None


async def test_an_engine_killed_mid_probe_is_failed_never_best_and_the_start_layout_comes_back(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8, TP8))
    kills: list[asyncio.Task] = []

    service = host.config.services[0]
    tp8 = service.unit_for(service.layout("TP8"))

    async def kill_soon() -> None:
        before = await logged(host, tp8, "Decode batch.")
        await until_logged(host, tp8, "Decode batch.", more_than=before)  # into the first level
        await kill_engine(host, "TP8")

    def on_event(event) -> None:
        if isinstance(event, ResultEvent) and event.layout == "TP8" and event.result.outcome == "ready":
            kills.append(asyncio.ensure_future(kill_soon()))

    run, store = explorer(sim_hosts, host, on_event)
    result = await run.run(ExploreOptions(("TP8",), SLOW))
    await asyncio.gather(*kills)
    (tp8,) = result.layouts
    assert kills and tp8.outcome == "failed", tp8
    assert "after the probe" in tp8.failure["summary"] or "no request succeeded" in tp8.failure["summary"]
    assert result.measured == 0 and result.best is None
    assert result.left_running == "EP8" and await running_ready(host) == "EP8"
    assert "none measured" in result.best_said()
    res = service_results(store, host.config, host.config.services[0])
    assert res.best is None
    store.close()


async def test_a_probe_in_which_every_request_failed_is_stored_failed_and_never_best(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8,))
    service = host.config.services[0]
    store = ResultsStore(sim_hosts.state_root / "audit.sqlite3")
    ep8 = service.unit_for(service.layout("EP8"))
    before = await logged(host, ep8, "Decode batch.")
    probing = asyncio.create_task(probe_service(host, service, SLOW, store=store))
    await until_logged(host, ep8, "Decode batch.", more_than=before)  # the first level's requests decode
    await kill_engine(host, "EP8")
    levels = await probing
    assert all(level.summary.completed == 0 for level in levels)
    res = service_results(store, host.config, service)
    assert res.best is None and {r.layout: r.outcome for r in res.rows}["EP8"] == "failed"
    assert {p.result.get("outcome") for p in store.probes()} == {"failed"}
    store.close()


class SlowFirstHealth:
    """A health probe whose first answer is a timeout (a /health slower than the probe waits)."""

    def __init__(self, probe) -> None:
        self.inner, self.calls = probe, 0

    async def probe(self) -> HealthSample:
        self.calls += 1
        if self.calls == 1:
            return HealthSample(taken_at=0.0, status="down", error="timeout after 3.0 s")
        return await self.inner.probe()

    async def close(self) -> None:
        await self.inner.close()


async def test_return_ends_on_the_running_layout_even_when_its_health_was_slow_at_the_start(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8, TP8))
    host.probes["k26"] = SlowFirstHealth(host.probes["k26"])
    run, store = explorer(sim_hosts, host)
    result = await run.run(ExploreOptions(("TP8",), QUICK, return_to_start=True))
    assert result.start_layout == "EP8" and [r.outcome for r in result.layouts] == ["measured"]
    assert result.left_running == "EP8" and await running_ready(host) == "EP8"
    store.close()


async def test_when_no_layout_meets_the_pick_rule_the_start_layout_is_left_running(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8, TP8))
    run, store = explorer(sim_hosts, host)
    result = await run.run(ExploreOptions(("TP8",), QUICK, pick=Pick("ttft-slo", 0.001)))
    assert [r.outcome for r in result.layouts] == ["measured"] and result.best is None
    assert result.left_running == "EP8" and await running_ready(host) == "EP8"
    assert result.best_said() == ("best by ttft-slo:0.001, the highest aggregate tok/s at a level whose p99 TTFT "
                                  "is at most 0.001 ms: none meets the rule")
    store.close()


async def test_a_probe_is_refused_while_an_explore_of_the_service_runs(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8,))
    service = host.config.services[0]
    async with host.lock(explore_lock_name(service)):  # what an explore holds for its whole sweep
        with pytest.raises(ProbeRefused, match="an explore or a switch of it runs"):
            await probe_service(host, service, QUICK)
    assert len(await probe_service(host, service, QUICK)) == 1  # and runs once it has ended


async def test_an_explore_is_refused_while_a_probe_of_the_service_runs(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8, TP8))
    service = host.config.services[0]
    started = asyncio.Event()
    probing = asyncio.create_task(probe_service(host, service, SLOW, on_progress=lambda *_a: started.set()))
    await asyncio.wait_for(started.wait(), 60)
    run, store = explorer(sim_hosts, host)
    with pytest.raises(ExploreRefused, match="a probe of k26"):
        await run.run(ExploreOptions(("TP8",), QUICK))
    probing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await probing
    store.close()
