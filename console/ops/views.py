"""What the console's panes show of a service and of a host: the view rules over `ops.status`.

The TUI's service pane and fleet table render these values; `serve-console status` reads the same
statuses. The fit of a layout is predicted once per (host, service, layout) and kept by its owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.config import ServiceConfig
from console.domain.fit import FitResult, expected_used_mib
from console.domain.layout import gpus_used
from console.domain.progress import STALLED, ServingVerdict
from console.domain.values import GpuSnapshot, HealthSample, Phase, UnitState
from console.hosts.base import Host
from console.hosts.endpoints import metrics_reader
from console.ops.ranks import ALIVE, DEAD
from console.ops.serving import ServingWatch, keep_stall_evidence, name_ranks
from console.ops.status import FOREIGN, ServiceStatus, service_status

if TYPE_CHECKING:
    from console.ops.audit import AuditLog


@dataclass(frozen=True, slots=True)
class ServiceView:
    """What the pane shows of one service, assembled from `ops.status.service_status`."""

    service: str
    taken_at: float
    unit: str | None = None
    state: UnitState | None = None
    layout: str | None = None
    fit_verdict: str | None = None
    fit_detail: str | None = None
    gpus_used: int | None = None
    """The layout's GPUs over all its nodes."""
    node_count: int = 1
    """How many hosts the layout runs on (its GPUs are split evenly between them)."""
    expected_mib: int | None = None
    """What each of the layout's GPUs is expected to hold (weights + the engine's KV pool), in MiB."""
    health: HealthSample | None = None
    health_answered_by: str | None = None
    """Who answered the health probe when none of the service's units runs (health `foreign`)."""
    phase: Phase | None = None
    last_ready_layout: str | None = None
    error: str | None = None
    death: str | None = None
    """What ended the last run, in words, when nothing runs and the journal names it (ops/death.py)."""
    group: str | None = None
    """A layout over several hosts: its worst node's state (alive, unresponsive, dead, unknown)."""
    nodes: tuple[str, ...] = ()
    """A layout over several hosts: each node's health in words, worst first."""
    orphans: tuple[str, ...] = ()
    """Units running on the service's other nodes while the head runs none, in words (ops/ranks.py)."""
    serving: ServingVerdict | None = None
    """Is it still serving (docs/stalls.md); None where the progress is not followed."""


@dataclass(frozen=True, slots=True)
class HostSummary:
    """One fleet row, assembled from the host's service statuses and GPU sample."""

    host: str
    taken_at: float
    reachable: bool
    error: str | None = None
    units_active: int = 0
    units_total: int = 0
    layouts: str = "-"
    gpu_used_mib: int | None = None
    gpu_total_mib: int | None = None
    gpus_busy: int | None = None
    gpu_count: int | None = None
    health: str = "-"
    failed: bool = False
    last_ok_at: float | None = None
    """For an unreachable host: when its connection last worked (from the host's link status)."""
    source: str = "ssh"
    """"ssh" (asked over the host's connection) or "prometheus" (read from `[fleet] prometheus`)."""
    stale: bool | None = None
    """Whether the data is stale, when the source says (Prometheus data is a scrape interval old)."""
    engines: str = "-"
    """The engines' own figures in a few words (from Prometheus)."""
    stalled: tuple[str, ...] = ()
    """The services that are stalled (docs/stalls.md), by name."""


class ServingCache:
    """Each service's progress as the open console follows it: (host, service) -> its ServingWatch."""

    def __init__(self) -> None:
        self._watches: dict[tuple[str, str], ServingWatch] = {}
        # each stall's evidence, kept in the background so that no poll waits on it: (host, service, since)
        self._evidence: dict[tuple[str, str, float], asyncio.Task[ServingVerdict]] = {}

    def watch(self, host: str, service: ServiceConfig) -> ServingWatch:
        key = (host, service.name)
        if key not in self._watches:
            self._watches[key] = ServingWatch(service)
        return self._watches[key]

    async def judge(self, host: Host, service: ServiceConfig, status: ServiceStatus) -> ServingVerdict | None:
        """This reading's verdict: one /metrics scrape against the last, the canary when one is due."""
        if status.active_unit is None:
            return None
        probe = host.probes.get(service.name)
        reader = metrics_reader(probe, service.engine)
        scrapes = []
        if reader is not None:
            with contextlib.suppress(Exception):  # no reading: the verdict stands on what else it has
                async with asyncio.timeout(5):
                    scrapes.append(await reader.scrape())
        verdict = name_ranks(self.watch(host.name, service).observe(status, scrapes, probe), status.gpus)
        if verdict.state != STALLED:
            return verdict
        key = (host.name, service.name, verdict.since)
        task = self._evidence.get(key)
        if task is None:
            task = self._evidence[key] = asyncio.create_task(
                keep_stall_evidence(host, service, verdict, status.active_unit), name=f"evidence-{service.name}")
        if task.done() and not task.cancelled() and task.exception() is None:
            verdict = dataclasses.replace(verdict, evidence=task.result().evidence)
        return verdict

    def close(self) -> None:
        for watch in self._watches.values():
            watch.close()
        for task in self._evidence.values():
            task.cancel()


class FitCache:
    """Predicted fits per (host, service, layout): the model config is read once, not once per poll."""

    def __init__(self) -> None:
        self._fits: dict[tuple[str, str, str], FitResult | None] = {}

    def get(self, host: Host, service: ServiceConfig, layout_name: str, snapshot: GpuSnapshot | None) -> FitResult | None:
        """The predicted fit of a layout, or None when it cannot be predicted."""
        from console.ops.fit_check import fit_layout, gpu_capacity

        key = (host.name, service.name, layout_name)
        if key not in self._fits:
            lc = service.layout(layout_name)
            try:
                self._fits[key] = fit_layout(service, lc, gpu_capacity(host.config, snapshot)) if lc else None
            except Exception:  # the picker reports an unreadable model config; the pane shows no verdict
                self._fits[key] = None
        return self._fits[key]


async def service_view(host: Host, service: ServiceConfig, *, fits: FitCache, audit: AuditLog | None = None,
                       snapshot: GpuSnapshot | None = None, fresh_health: bool = False,
                       serving: ServingCache | None = None) -> ServiceView:
    """One service's status for the service pane (`fresh_health`: probe now, see `service_status`;
    `serving`: follow its progress)."""
    status = await service_status(host, service, audit=audit, snapshot=snapshot, fresh_health=fresh_health)
    verdict = await serving.judge(host, service, status) if serving is not None else None
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
    fit = fits.get(host, service, layout, status.gpus) if layout else None
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
        node_count=lc.nodes if lc is not None and service.cluster is not None else 1,
        expected_mib=expected_used_mib(fit),
        health=status.health,
        health_answered_by=status.answered_by,
        # the last run died, or another program answers the port of a service that is not running: failed
        phase=Phase.FAILED if status.death is not None or status.group == DEAD or status.orphans
        or (status.health is not None and status.health.status == FOREIGN) else None,
        death=None if status.death is None else f"{status.death.finding.cls.value}: {status.death.finding.summary}",
        group=status.group,
        nodes=tuple(n.words() for n in sorted(status.ranks, key=lambda n: n.state == ALIVE)),
        orphans=tuple(o.words(host.name, service.name) for o in status.orphans),
        last_ready_layout=last_ready,
        error=status.error,
        serving=verdict,
    )


async def host_summary(host: Host, clock: Callable[[], float], *, audit: AuditLog | None = None,
                       serving: ServingCache | None = None) -> HostSummary:
    """One fleet row: every service's status, one GPU sample (`serving`: follow each one's progress)."""
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
    stalled = []
    if serving is not None:
        for service, st in zip(host.config.services, statuses, strict=True):
            verdict = await serving.judge(host, service, st)
            if verdict is not None and verdict.state == "stalled":
                stalled.append(service.name)
    units = [u for st in statuses for u in st.units]
    layouts = ", ".join(f"{st.service}: {st.active_layout or '-'}" for st in statuses) or "-"
    # a head that answers 200 over a dead or wedged node is not healthy: the group's worst node says so
    health = ", ".join(st.health.status + (f" ({st.group} node)" if st.group not in (None, ALIVE) else "")
                       for st in statuses if st.health) or "-"
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
        failed=(any(u.is_failed for u in units) and not any(u.is_running for u in units))
        or any(st.death is not None or st.group == DEAD or st.orphans for st in statuses),
        stalled=tuple(stalled),
    )
