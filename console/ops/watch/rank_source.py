"""The watch daemon's rank source: each node of a service over several hosts, alive or not, read as the
TUI's service pane reads it (ops/ranks.py), for the ServeRankDead rule."""

from __future__ import annotations

from console.config import ServiceConfig
from console.domain.alerts import RankLiveness
from console.hosts.base import Host
from console.ops.ranks import ALIVE, node_health
from console.ops.status import running_layout, unit_states


async def rank_liveness(host: Host, service: ServiceConfig) -> list[RankLiveness] | None:
    """Each node of the service's running layout as the watch daemon's rank rule reads it (its
    `rank_source`); None when the service runs on one host, or runs nothing."""
    if service.cluster is None:
        return None
    unit, layout = running_layout(host.name, service, await unit_states(host, service), None)
    running = service.layout(layout) if layout else None
    if unit is None or running is None or running.nodes < 2:
        return None
    return [RankLiveness(rank=f"node-rank {n.node_rank} (ranks {n.ranks_text()})", host=n.host, unit=n.unit,
                         alive=n.state == ALIVE, detail=n.detail) for n in await node_health(host, service, running, unit)]  # fmt: skip
