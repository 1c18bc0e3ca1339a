"""What the panes show, assembled from the ops layer (the same calls `serve-console status` makes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.config import ServiceConfig
from console.domain.models import GpuSnapshot
from console.hosts.base import Host
from console.ui.widgets.fleet_table import HostSummary
from console.ui.widgets.service_pane import ServiceView

if TYPE_CHECKING:
    from console.ops.audit import AuditLog

#: Fit per (host, service, layout): the model config is read once, not once per poll.
_FIT_CACHE: dict[tuple[str, str, str], Any] = {}


def layout_fit(host: Host, service: ServiceConfig, layout_name: str, snapshot: GpuSnapshot | None) -> Any:
    """The predicted fit of a layout (cached), or None when it cannot be predicted."""
    from console.ops.fit_check import fit_layout, gpu_capacity

    key = (host.name, service.name, layout_name)
    if key not in _FIT_CACHE:
        lc = service.layout(layout_name)
        try:
            _FIT_CACHE[key] = fit_layout(service, lc, gpu_capacity(host.config, snapshot)) if lc else None
        except Exception:  # the picker reports an unreadable model config; the pane just shows no verdict
            _FIT_CACHE[key] = None
    return _FIT_CACHE[key]


async def fetch_service_view(host: Host, service: ServiceConfig, clock: Callable[[], float], *,
                             audit: AuditLog | None = None, snapshot: GpuSnapshot | None = None) -> ServiceView:
    """One service's status for the service pane."""
    from console.domain.layout import gpus_used
    from console.ops.status import service_status

    status = await service_status(host, service, audit=audit, snapshot=snapshot)
    state = status.active_state
    unit = status.active_unit
    if state is None:
        # Nothing runs: show the unit that failed last (unmistakably), else the newest one that ran.
        candidates = sorted(status.units, key=lambda s: (s.is_failed, s.since or 0.0), reverse=True)
        if candidates and (candidates[0].is_failed or candidates[0].since):
            state = candidates[0]
            unit = state.unit
    layout = status.active_layout
    if layout is None and unit is not None:
        layout = next((lc.name for lc in service.layouts if service.unit_for(lc) == unit
                       and len(service.all_units()) == len(service.layouts)), None)
    fit = layout_fit(host, service, layout, status.gpus) if layout else None
    lc = service.layout(layout) if layout else None
    detail = None
    if fit is not None and fit.weights_gib_per_gpu is not None:
        detail = f"{fit.weights_gib_per_gpu:.1f} GiB/GPU, headroom {fit.headroom_gib:+.1f} GiB"
    last_ready = None
    if audit is not None:
        try:
            last_ready = audit.last_ready_layout(host.name, service.name)
        except Exception:
            last_ready = None
    return ServiceView(
        service=service.name,
        taken_at=status.taken_at,
        unit=unit,
        state=state,
        layout=layout,
        fit_verdict=fit.verdict if fit is not None else None,
        fit_detail=detail,
        gpus_used=gpus_used(lc.layout, service.engine) if lc is not None else None,
        health=status.health,
        last_ready_layout=last_ready,
        error=status.error,
    )


async def fetch_host_summary(host: Host, clock: Callable[[], float], *, audit: AuditLog | None = None) -> HostSummary:
    """One fleet row: every service's status, one GPU sample."""
    from console.ops.status import service_status

    snapshot: GpuSnapshot | None = None
    try:
        async with asyncio.timeout(10):
            snapshot = await host.gpus.sample()
    except Exception:
        snapshot = None
    statuses = [await service_status(host, s, audit=audit, snapshot=snapshot) for s in host.config.services]
    errors = [st.error for st in statuses if st.error]
    unit_errors = [e for e in errors if e.startswith("units:")]
    reachable = host.link.state != "down" and not (statuses and len(unit_errors) == len(statuses))
    if not reachable:
        return HostSummary(host.name, clock(), reachable=False, error=host.link.error or "; ".join(errors),
                           last_ok_at=host.link.last_ok_at)
    units = [u for st in statuses for u in st.units]
    layouts = ", ".join(f"{st.service}: {st.active_layout or '-'}" for st in statuses) or "-"
    health = ", ".join(st.health.status for st in statuses if st.health) or "-"
    gpus = snapshot.gpus if snapshot else ()
    totals = [g.total_mib for g in gpus if g.total_mib]
    return HostSummary(
        host=host.name,
        taken_at=statuses[0].taken_at if statuses else clock(),
        reachable=True,
        error="; ".join(errors) or None,
        units_active=sum(1 for u in units if u.is_running),
        units_total=len(units),
        layouts=layouts,
        gpu_used_mib=sum(g.used_mib or 0 for g in gpus) if gpus else None,
        gpu_total_mib=sum(totals) if totals else None,
        gpus_busy=sum(1 for g in gpus if (g.used_mib or 0) > 1024) if gpus else None,
        gpu_count=len(gpus) or None,
        health=health,
        failed=any(u.is_failed for u in units) and not any(u.is_running for u in units),
    )
