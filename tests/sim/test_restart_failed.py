"""`restart` brings a failed unit back, as `systemctl restart` does (the TUI's `R` on a FAILED banner)."""

from __future__ import annotations

from sim_fixtures import EP8, TP8, kill_engine
from waiting import await_for

from console.ops.switch.orchestrate import switch_layout
from console.ops.switch.service_control import NOTHING, restart_service


async def test_restart_brings_a_failed_unit_back(sim_hosts):
    host = sim_hosts(layout_specs=(EP8, TP8))
    service = host.config.services[0]
    assert (await restart_service(host, service)).outcome == NOTHING  # nothing ran, nothing failed
    assert (await switch_layout(host, None, "EP8", timeout_s=60)).outcome == "ready"
    await kill_engine(host, "EP8")
    unit = service.unit_for(service.layout("EP8"))

    async def failed():
        return (await host.services.state(unit)).is_failed

    await await_for(failed, f"{unit} to fail after the kill")
    result = await restart_service(host, service, timeout_s=60)
    assert result.outcome == "ready" and result.unit == unit and result.layout == "EP8"
    assert (await host.services.state(unit)).is_running
