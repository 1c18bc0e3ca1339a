"""Is a service in an incident the console already knows, and which one: the states whose evidence a
stop, restart, switch or rollback would destroy.

- a unit that failed (a failed start, a crash loop, a node whose unit failed), on any node;
- an engine that died with a clean exit (nothing runs; its journal names a fatal cause, ops/death.py);
- a node of a running layout over several hosts that is dead or unresponsive (ops/ranks.py).

A stall is named by the stall verdict itself, which calls `collect_evidence` with its own key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.cluster import node_hosts
from console.ops.death import last_death
from console.ops.evidence.collect import EVIDENCE_DEADLINE_S, Evidence, collect_evidence
from console.ops.ranks import ALIVE, UNKNOWN, node_health
from console.ops.status import running_layout, unit_states


@dataclass(frozen=True, slots=True)
class Incident:
    """What went wrong, with the key that tells it from the next incident of the same service."""

    kind: str
    key: str
    reason: str
    since: float | None
    unit: str | None = None
    """The unit whose run it is (the same failure seen by two faces at two moments is one incident)."""


async def incident_of(host: Host, service: ServiceConfig) -> Incident | None:
    """The incident `service` is in now, None when it is not in one (or cannot be read). A unit that
    failed before the one running now began is history, not the incident."""
    nodes = [host]
    if service.cluster is not None:
        try:
            nodes = node_hosts(host, service)
        except Exception:
            nodes = [host]
    states = {}
    for node in nodes:
        try:
            states[node.name] = await unit_states(node, service)
        except Exception:
            states[node.name] = []
    head_states = states.get(host.name, [])
    unit, layout = running_layout(host.name, service, head_states, None)
    began = next((s.since for s in head_states if s.unit == unit), None) if unit else None
    failed = sorted(((node, st) for node in nodes for st in states[node.name] if st.is_failed
                     and (began is None or (st.since or 0.0) >= began)), key=lambda ns: ns[1].since or 0.0)
    if failed:
        node, st = failed[-1]
        how = f"result {st.result}" if st.result else "failed"
        return Incident("unit_failed", f"failed:{node.name}:{st.unit}:{st.since}",
                        f"{st.unit} on {node.name} failed ({how})", st.since, st.unit)
    if unit is None:
        death = await last_death(host, service, head_states)
        if death is not None:
            return Incident(death.finding.cls.value, f"died:{death.unit}:{death.finding.ts}",
                            death.words(), death.finding.ts, death.unit)
        return None
    running = service.layout(layout) if layout else None
    if running is not None and running.nodes > 1:
        try:
            for health in await node_health(host, service, running, unit):
                if health.state not in (ALIVE, UNKNOWN):
                    return Incident("node_" + health.state, f"node:{health.host}:{unit}:{health.state}:{began}",
                                    health.words(), began, unit)
        except Exception:
            return None
    return None


async def evidence_before(host: Host, service: ServiceConfig, action: str, *,
                          deadline_s: float = EVIDENCE_DEADLINE_S, state_root: Path | None = None,
                          on_incident: Callable[[Incident], None] | None = None) -> Evidence | None:
    """Before `action` (stop, restart, switch, rollback) of a service in an incident: its evidence, once
    per incident, `deadline_s` at most; None when the service is in no incident. `on_incident` hears the
    incident before its evidence is collected (a face says why it waits). Never raises: evidence that
    cannot be had (an unusable state dir) never holds back the action."""
    try:
        incident = await incident_of(host, service)
        if incident is None:
            return None
        if on_incident is not None:
            on_incident(incident)
        return await collect_evidence(host, service, incident.reason, kind=incident.kind, key=incident.key,
                                      since=incident.since, deadline_s=deadline_s, state_root=state_root,
                                      trigger=action, unit=incident.unit)
    except Exception:
        return None
