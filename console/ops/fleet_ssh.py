"""Fleet rows over each host's own connection: the path without `[fleet]`, fine for tens of hosts."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from console.ops.fleet import FleetRow
from console.ops.fleet_query import BUSY_MIB
from console.ops.status import unit_states

if TYPE_CHECKING:
    from console.hosts.base import Host


async def ssh_row(host: Host, *, timeout_s: float = 10.0) -> FleetRow:
    """One host's row from a GPU sample and its unit states; a host that fails is down, with the age of
    its last good data. The engines' own figures are not read on this path (None)."""
    try:
        async with asyncio.timeout(timeout_s):
            snapshot = await host.gpus.sample()
            for service in host.config.services:
                await unit_states(host, service)  # proves the link, as a status cycle does
    except Exception as exc:  # a down host is a row, not a failure of the fleet
        age = host.link.age_s()
        return FleetRow(host=host.name, source="ssh", up=False, age_s=age, stale=True,
                        error=str(exc) or type(exc).__name__)
    gpus = snapshot.gpus
    totals = [g.total_mib for g in gpus if g.total_mib]
    used = [g.used_mib for g in gpus if g.used_mib is not None]
    return FleetRow(
        host=host.name, source="ssh", up=host.link.state != "down", age_s=max(0.0, time.time() - snapshot.taken_at),
        stale=False,
        gpus_used_mib=sum(used) if used else None,
        gpus_total_mib=sum(totals) if totals else None,
        gpus_busy=sum(1 for u in used if u > BUSY_MIB) if used else None,
        gpu_count=len(gpus) or None,
        error=snapshot.error,
    )  # fmt: skip
