"""Fleet rows over each host's own connection: the path without `[fleet]`, fine for tens of hosts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.ops.engine_status import engine_figures
from console.ops.fleet.query import BUSY_MIB
from console.ops.fleet.rows import FleetRow
from console.ops.status import unit_states

if TYPE_CHECKING:
    from console.domain.metrics import EngineFigures
    from console.hosts.base import Host


def _sum(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


async def ssh_row(host: Host, *, timeout_s: float = 10.0, engine_metrics: bool = True) -> FleetRow:
    """One host's row from a GPU sample, its unit states and (with `engine_metrics`) the running
    engines' own figures (two `/metrics` readings 1 s apart). A host that fails is down, with the age
    of its last good data."""
    try:
        async with asyncio.timeout(timeout_s):
            snapshot = await host.gpus.sample()
            running = [any(s.is_running for s in await unit_states(host, svc)) for svc in host.config.services]
            readings = await asyncio.gather(*(engine_figures(host, svc, running=run)
                                              for svc, run in zip(host.config.services, running, strict=True)
                                              if run and engine_metrics))
    except Exception as exc:  # a down host is a row, not a failure of the fleet
        return FleetRow(host=host.name, source="ssh", up=False, age_s=host.link.age_s(), stale=True,
                        error=str(exc) or type(exc).__name__)
    engines: list[EngineFigures] = [figures for figures, _reason in readings if figures is not None]
    gpus = snapshot.gpus
    totals = [g.total_mib for g in gpus if g.total_mib]
    used = [g.used_mib for g in gpus if g.used_mib is not None]
    kv = [e.kv_cache_usage for e in engines if e.kv_cache_usage is not None]
    running_requests = _sum([e.running_requests for e in engines])
    waiting_requests = _sum([e.waiting_requests for e in engines])
    return FleetRow(
        host=host.name, source="ssh", up=host.link.state != "down", age_s=max(0.0, time.time() - snapshot.taken_at),
        stale=False,
        gpus_used_mib=sum(used) if used else None,
        gpus_total_mib=sum(totals) if totals else None,
        gpus_busy=sum(1 for u in used if u > BUSY_MIB) if used else None,
        gpu_count=len(gpus) or None,
        running_requests=None if running_requests is None else int(running_requests),
        waiting_requests=None if waiting_requests is None else int(waiting_requests),
        kv_cache_usage=max(kv) if kv else None,
        generation_tokens_per_s=_sum([e.generation_tokens_per_s for e in engines]),
        engine_age_s=max((e.age_s for e in engines), default=None),
        error=snapshot.error,
    )  # fmt: skip
