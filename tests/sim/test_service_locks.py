"""A switch, a stop or a restart of a service is refused while an explore of it runs, and an explore
while a plain switch runs: nothing lands between two of an explore's layouts (ops/service_locks.py)."""

from __future__ import annotations

import asyncio

import pytest
from sim_fixtures import EP8, TP8

from console.hosts.base import LockBusy
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.report import ExploreOptions
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.sweep import Explore, ExploreRefused
from console.ops.switch.events import StepEvent
from console.ops.switch.locks import explore_lock_name, lock_name
from console.ops.switch.orchestrate import switch_layout
from console.ops.switch.service_control import restart_service, stop_service

PROBE = ProbeOptions(concurrency=(1,), num_prompts=2, input_len=16, output_len=8, warmup=0)


async def test_a_plain_switch_is_refused_while_an_explore_runs(sim_hosts):
    host = sim_hosts(layout_specs=(EP8, TP8))
    service = host.config.services[0]
    async with host.lock(explore_lock_name(service)):
        result = await switch_layout(host, None, "EP8", timeout_s=60)
    assert result.outcome == "refused"
    assert result.reason.startswith(f"an explore or a probe of {service.name} is running on {host.name}")
    assert (await host.services.state("sim-k26@ep8.service")).active == "inactive"
    assert (await switch_layout(host, None, "EP8", timeout_s=60)).outcome == "ready"


async def test_stop_and_restart_are_refused_while_an_explore_runs(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8,))
    service = host.config.services[0]
    async with host.lock(explore_lock_name(service)):
        stopped = await stop_service(host, service)
        restarted = await restart_service(host, service, timeout_s=60)
    assert stopped.outcome == "refused" and "an explore" in stopped.reason
    assert restarted.outcome == "refused" and "an explore" in restarted.reason
    assert (await host.services.state("sim-k26@ep8.service")).active == "active"


async def test_a_plain_switch_holds_the_explore_lock_while_it_runs(sim_hosts):
    host = sim_hosts(layout_specs=(EP8,))
    service = host.config.services[0]
    seen: list[str] = []

    async def try_explore() -> None:
        audit = sim_hosts.audit()
        run = Explore(host, service, audit=audit, store=ResultsStore.beside(audit))
        try:
            await run.run(ExploreOptions(("EP8",), PROBE))
        except ExploreRefused as exc:
            seen.append(str(exc))

    tasks = []

    def on_event(event) -> None:
        if isinstance(event, StepEvent) and not tasks:
            tasks.append(asyncio.ensure_future(try_explore()))

    result = await switch_layout(host, None, "EP8", timeout_s=60, on_event=on_event)
    await tasks[0]
    assert result.outcome == "ready"
    assert seen and "another explore or a switch" in seen[0]


async def test_an_explores_own_switch_takes_only_the_switch_lock(sim_hosts):
    host = sim_hosts(layout_specs=(EP8,))
    service = host.config.services[0]
    async with host.lock(explore_lock_name(service)):
        result = await switch_layout(host, None, "EP8", timeout_s=60, within_explore=True)
        assert result.outcome == "ready"
        with pytest.raises(LockBusy):
            async with host.lock(explore_lock_name(service)):
                pass
    async with host.lock(lock_name(service)):
        refused = await switch_layout(host, None, "EP8", timeout_s=60, within_explore=True, restart_ready=True)
    assert refused.outcome == "refused" and "another switch" in refused.reason
