"""The canary (docs/stalls.md): a ready service with nothing pending gets one one-token request after
canary_every_s; no first token within canary_timeout_s is a stall, even with every gauge at 0 (a blocked
scheduler that took the request in but never ran a step). `canary = false` sends none."""

from __future__ import annotations

import asyncio
import dataclasses

from sim_fixtures import free_port, qwen_host, stalling_host, until_ready
from waiting import WaitTimeout, await_for

from console.ops.engine_status import engine_readings
from console.ops.serving import ServingWatch
from console.ops.status import service_status


async def _watch(host, service, serving: ServingWatch, until, timeout_s: float = 90.0):
    """Readings, as the console's serving watch takes them, until `until(verdict)`; that verdict."""

    async def reached():
        st = await service_status(host, service, fresh_health=True)
        _, _, scrapes = await engine_readings(host, service, running=st.active_unit is not None, interval_s=0.1)
        verdict = serving.observe(st, scrapes[-1:], host.probes.get(service.name))
        return verdict if until(verdict) else None

    try:
        return await await_for(reached, "the verdict awaited", timeout_s=timeout_s, interval_s=0.3)
    except WaitTimeout as error:
        raise AssertionError(f"{error}; last verdict {serving.verdict}") from None


async def test_a_canary_that_gets_no_token_names_the_stall(sim_hosts) -> None:
    cfg = stalling_host(free_port(), "stall")
    service = dataclasses.replace(cfg.services[0], canary_every_s=1.0, canary_timeout_s=3.0, stall_after_s=20.0)
    host = sim_hosts(dataclasses.replace(cfg, services=(service,)))
    unit = service.unit_for(service.layouts[0])
    await host.services.start(unit)
    serving = ServingWatch(service)
    try:
        await until_ready(host, service)
        verdict = await _watch(host, service, serving, lambda v: v.state == "stalled")
        assert serving.canaries_sent == 1
        assert "canary" in verdict.reason and "no first token in 3 s" in verdict.reason
        assert verdict.pending.running == 0  # the gauges never saw it: only the canary tells
    finally:
        serving.close()
        await host.services.stop(unit)


async def test_a_healthy_idle_service_answers_its_canary_and_canary_false_sends_none(sim_hosts) -> None:
    cfg = qwen_host(free_port())
    service = dataclasses.replace(cfg.services[0], canary_every_s=1.0, canary_timeout_s=10.0)
    host = sim_hosts(dataclasses.replace(cfg, services=(service,)))
    unit = service.unit_for(service.layout("TP4"))
    await host.services.start(unit)
    serving = ServingWatch(service)
    quiet = ServingWatch(dataclasses.replace(service, canary=False))
    try:
        await until_ready(host, service)
        await _watch(host, service, serving, lambda v: serving.canaries_sent >= 2)
        assert serving.verdict is not None and serving.verdict.state != "stalled"
        for _ in range(8):
            st = await service_status(host, service)
            _, _, scrapes = await engine_readings(host, service, running=True, interval_s=0.1)
            verdict = quiet.observe(st, scrapes[-1:], host.probes.get(service.name))
            await asyncio.sleep(0.3)  # deliberate: readings spread over 2 s past canary_every_s, for none to be sent
        assert quiet.canaries_sent == 0 and verdict.state == "idle"
    finally:
        serving.close()
        await host.services.stop(unit)
