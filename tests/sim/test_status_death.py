"""A service whose engine died says so in `status`, though systemd saw a clean exit (issue 19).

vLLM's API server exits 0 after its engine core is killed (tests/fixtures/vllm-real/kill9-*.txt), so the
unit is `inactive`, as after `systemctl stop`. The journal tells them apart: the death is named from it,
and a stop that was asked for is none.
"""

from __future__ import annotations

import dataclasses

from sim_fixtures import free_port, qwen_host
from waiting import await_for

from console.config import LayoutConfig
from console.domain.layout import parse_layout
from console.ops.status import service_status
from console.ops.views import FitCache, service_view


def dying_host(port: int):
    cfg = qwen_host(port)
    service = cfg.services[0]
    dies = LayoutConfig("TP4 dies", dataclasses.replace(parse_layout("TP4"), extra_args=("--fail", "engine_dead")))
    return dataclasses.replace(cfg, services=(dataclasses.replace(service, layouts=(*service.layouts, dies)),))


async def wait_stopped(host, unit: str, timeout_s: float = 60.0):
    async def stopped():
        state = await host.services.state(unit)
        return state if state.since and not state.is_running else None

    return await await_for(stopped, f"{unit} to stop", timeout_s=timeout_s, interval_s=0.2)


async def test_an_engine_that_died_with_a_clean_exit_is_a_death_and_a_stop_is_none(sim_hosts) -> None:
    host = sim_hosts(dying_host(free_port()))
    service = host.config.services[0]
    dies = service.unit_for(service.layout("TP4 dies"))
    await host.services.start(dies)
    state = await wait_stopped(host, dies)
    log = [e.message async for e in host.services.journal(dies, follow=False, lines=40)]
    assert state.active == "inactive", log  # systemd saw exit 0: nothing failed, by its lights

    status = await service_status(host, service)
    death = status.to_json()["death"]
    assert death is not None and death["kind"] == "engine_died" and death["unit"] == dies
    assert death["unit_active"] == "inactive" and "engine core exited unexpectedly" in death["line"]
    view = await service_view(host, service, fits=FitCache())
    assert view.phase is not None and view.phase.value == "failed" and view.death.startswith("engine_died: ")

    tp4 = service.unit_for(service.layout("TP4"))
    await host.services.start(tp4)
    assert (await service_status(host, service)).death is None  # something runs: no death to report

    async def up():
        return (await host.services.state(tp4)).is_running

    await await_for(up, f"{tp4}'s engine to run")
    await host.services.stop(tp4)  # vLLM logs EngineDeadError when stopped; the stop was asked for
    await wait_stopped(host, tp4)
    assert (await service_status(host, service)).death is None
