"""A service's status at a glance: its units, the active layout, the host's GPUs and the health probe."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from console.config import DROP_IN, ENV_FILE, LayoutConfig, ServiceConfig
from console.domain.triage import xid_findings
from console.domain.values import GpuSnapshot, HealthSample, UnitState
from console.ops.death import Death, last_death
from console.ops.ranks import NodeHealth, NodeUnit, group_state, node_health, orphan_units

if TYPE_CHECKING:
    from console.hosts.base import Host
    from console.ops.audit import AuditLog


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """One service on one host, now."""

    host: str
    service: str
    engine: str
    units: tuple[UnitState, ...]
    active_unit: str | None
    active_layout: str | None
    health: HealthSample | None
    gpus: GpuSnapshot | None
    taken_at: float
    error: str | None = None
    answered_by: str | None = None
    """Who answered the health probe, in words, when none of the service's units runs (health `foreign`)."""
    death: Death | None = None
    """How the last run ended, when nothing runs and its journal names a fatal cause (ops/death.py)."""
    ranks: tuple[NodeHealth, ...] = ()
    """Each node of a running layout over several hosts, judged on its own (ops/ranks.py)."""
    orphans: tuple[NodeUnit, ...] = ()
    """Units of the service running on its other nodes while the head runs none (ops/ranks.py)."""

    @property
    def group(self) -> str | None:
        """The worst node's state, for a layout over several hosts (None on one host)."""
        return group_state(self.ranks) if self.ranks else None

    @property
    def unreachable(self) -> str | None:
        """Why the units could not be read, when they could not: the host does not answer."""
        if self.units or not self.error:
            return None
        found = next((part for part in self.error.split("; ") if part.startswith("units: ")), None)
        return None if found is None else f"the host does not answer ({found.removeprefix('units: ')})"

    @property
    def active_state(self) -> UnitState | None:
        return next((u for u in self.units if u.unit == self.active_unit), None)

    def to_json(self) -> dict[str, Any]:
        """The `status --json` line of this service."""
        st = self.active_state
        gpus = self.gpus.gpus if self.gpus else ()
        return {
            "event": "status",
            "host": self.host,
            "service": self.service,
            "engine": self.engine,
            "active_layout": self.active_layout,
            "unit": self.active_unit,
            "state": None if st is None else _state_json(st),
            "units": [_state_json(u) for u in self.units],
            "health": None
            if self.health is None
            else {
                "status": self.health.status,
                "http_status": self.health.http_status,
                "error": self.health.error,
                "answered_by": self.answered_by,
            },
            "gpus": [
                {
                    "index": g.index,
                    "name": g.name,
                    "used_mib": g.used_mib,
                    "total_mib": g.total_mib,
                    "util_pct": g.util_pct,
                    "temp_c": g.temp_c,
                    "power_w": g.power_w,
                    "xid": g.xid,
                }
                for g in gpus
            ],
            "gpu_findings": [f.to_json() for f in xid_findings(self.gpus)],
            "gpu_used_mib": sum(g.used_mib or 0 for g in gpus),
            "gpu_total_mib": sum(g.total_mib or 0 for g in gpus),
            "gpu_error": self.gpus.error if self.gpus else None,
            "death": None if self.death is None else self.death.to_json(),
            "ranks": [n.to_json() for n in self.ranks],
            "group": self.group,
            "orphans": [o.to_json() for o in self.orphans],
            "error": self.error,
            "taken_at": self.taken_at,
        }


def _state_json(st: UnitState) -> dict[str, Any]:
    return {
        "unit": st.unit,
        "active": st.active,
        "sub": st.sub,
        "result": st.result,
        "main_pid": st.main_pid,
        "since": st.since,
    }


def resolve_layout(service: ServiceConfig, name: str | None) -> LayoutConfig | None:
    return service.layout(name) if name else None


async def unit_states(host: Host, service: ServiceConfig) -> list[UnitState]:
    """The state of every unit the service may run, in layout order."""
    return list(await asyncio.gather(*(host.services.state(u) for u in service.all_units())))


def running_layout(
    host_name: str, service: ServiceConfig, states: list[UnitState], audit: AuditLog | None
) -> tuple[str | None, str | None]:
    """(unit, layout name) of the running layout, or (None, None).

    Unit-per-layout and template services show it in which unit runs. A single unit (env file, drop-in)
    runs whatever the console last started on it, which the audit log remembers.
    """
    running = [s for s in states if s.is_running]
    if not running:
        return None, None
    unit = running[0].unit
    return unit, layout_of_unit(host_name, service, unit, audit)


def layout_of_unit(host_name: str, service: ServiceConfig, unit: str, audit: AuditLog | None) -> str | None:
    """The layout a unit of the service runs: its own for unit-per-layout and template services; for a
    single unit (env file, drop-in), whatever the console last started on it, as the audit log says."""
    if service.mapping in (ENV_FILE, DROP_IN):
        name = audit.last_started_layout(host_name, service.name) if audit else None
        lc = resolve_layout(service, name)
        return lc.name if lc else None
    return next((lc.name for lc in service.layouts if service.unit_for(lc) == unit), None)


#: While the same engine runs and answered ready, its health is asked again only this often: an idle
#: journal is not the console's own probes (a switch's watch probes every 0.5 s on its own).
READY_PROBE_INTERVAL_S = 5.0

_last_ready: weakref.WeakKeyDictionary[Any, tuple[tuple, HealthSample, float]] = weakref.WeakKeyDictionary()


async def recent_health(probe: Any, states: list[UnitState], *, max_age_s: float = READY_PROBE_INTERVAL_S) -> HealthSample:
    """The probe's reading: a ready one younger than `max_age_s` of the same running engine, else a new one.

    Only "ready" is reused, and only while the same units run with the same main pids: a start, a stop
    or a death is probed at once.
    """
    engines = tuple((s.unit, s.main_pid) for s in states if s.is_running)
    try:
        cached = _last_ready.get(probe)
    except TypeError:  # a probe that cannot be weakly referenced is simply asked every time
        cached = None
    now = time.monotonic()
    if cached is not None and cached[0] == engines and engines and now - cached[2] < max_age_s:
        return cached[1]
    sample = await probe.probe()
    with contextlib.suppress(TypeError):
        if sample.status == "ready":
            _last_ready[probe] = (engines, sample, now)
        else:
            _last_ready.pop(probe, None)
    return sample


#: The health status of a service's port answered while none of its units runs: another program's 200.
FOREIGN = "foreign"


async def answered_by_another(host: Host, service: ServiceConfig, sample: HealthSample) -> tuple[HealthSample, str]:
    """A ready answer on the port of a service none of whose units runs, said as what it is: another
    program's, never the service's readiness. Returns the sample so marked, and who answered in words
    (named where the host can tell: /proc on the simulated host, `ss -ltnp` on a real one)."""
    parts = urlsplit(service.url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    holder = None
    if host.port_holder is not None:
        with contextlib.suppress(Exception):  # the host cannot say: the answer is still not the service's
            holder = await host.port_holder(port)
    who = holder or "another program (the host cannot say which)"
    marked = dataclasses.replace(sample, status=FOREIGN,
                                 error=f"port {port} answered by {who}, not by a unit of {service.name}")
    return marked, who


async def service_status(
    host: Host,
    service: ServiceConfig,
    *,
    audit: AuditLog | None = None,
    snapshot: GpuSnapshot | None = None,
    fresh_health: bool = False,
) -> ServiceStatus:
    """Unit states, active layout, GPUs and health of one service; a failing part sets `error`.

    Args:
        fresh_health: probe now even when a ready reading of the same engine is recent (the phase just
            reached READY, a switch just ended).
    """
    errors: list[str] = []
    states: list[UnitState] = []
    try:
        states = await unit_states(host, service)
    except Exception as exc:  # a host that is down still gets a status line
        errors.append(f"units: {exc}")
    unit, layout = running_layout(host.name, service, states, audit)
    health, answered_by = None, None
    probe = host.probes.get(service.name)
    if probe is not None:
        try:
            health = await recent_health(probe, states, max_age_s=0.0 if fresh_health else READY_PROBE_INTERVAL_S)
            if health.status == "ready" and states and not any(s.is_running for s in states):
                health, answered_by = await answered_by_another(host, service, health)
        except Exception as exc:
            errors.append(f"health: {exc}")
    if snapshot is None:
        try:
            snapshot = await host.gpus.sample()
        except Exception as exc:
            errors.append(f"gpus: {exc}")
    death = await last_death(host, service, states) if unit is None else None
    ranks: list[NodeHealth] = []
    orphans: list[NodeUnit] = []
    ranks_unit, running = unit, None
    if unit is None and service.cluster is not None and states:  # the head runs nothing: do its nodes?
        try:
            orphans = await orphan_units(host, service)
        except Exception as exc:
            errors.append(f"nodes: {exc}")
        if orphans:  # judge the layout they run, the head included (dead, with its own cause)
            ranks_unit = orphans[0].unit
            layout_name = layout_of_unit(host.name, service, ranks_unit, audit)
            running = service.layout(layout_name) if layout_name else None
    elif layout and unit and service.cluster is not None:
        running = service.layout(layout)
    if running is not None and running.nodes > 1 and ranks_unit is not None:
        try:
            ranks = await node_health(host, service, running, ranks_unit)
        except Exception as exc:
            errors.append(f"ranks: {exc}")
    return ServiceStatus(
        host=host.name,
        service=service.name,
        engine=service.engine.value,
        units=tuple(states),
        active_unit=unit,
        active_layout=layout,
        health=health,
        gpus=snapshot,
        taken_at=time.time(),
        error="; ".join(errors) or None,
        answered_by=answered_by,
        death=death,
        ranks=tuple(ranks),
        orphans=tuple(orphans),
    )


async def running_units(hosts: Iterable[Host]) -> set[tuple[str, str]]:
    """(host, unit) of every configured unit that runs now."""
    out: set[tuple[str, str]] = set()
    for host in hosts:
        for service in host.config.services:
            for unit in service.all_units():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        state = await host.services.state(unit)
                    if state.is_running:
                        out.add((host.name, unit))
    return out


def kill_started_units(hosts: Iterable[Host], at_start: set[tuple[str, str]]) -> bool:
    """The shutdown's last resort for the demo (from its watchdog thread, so without awaiting): SIGKILL
    what runs of the units that did not run at start, on the simulated hosts, which alone can (a real
    host's units are systemd's, and a console never kills them). True when something was killed."""
    killed = False
    for host in hosts:
        kill = getattr(host.services, "kill_all", None)  # the simulated host's process manager
        if kill is not None:
            killed |= bool(kill(spare=frozenset(u for h, u in at_start if h == host.name)))
    return killed
