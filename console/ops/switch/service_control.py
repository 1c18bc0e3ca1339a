"""Stop or restart a service's running unit, under the service's switch lock.

A restart is watched like a switch's start (journal, unit state and health at once, `StartFollower`), so
it ends READY or FAILED with its triaged cause, never a bare "done" while the engine is still loading.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.audit import AuditLog
from console.ops.cluster import node_hosts
from console.ops.evidence import EVIDENCE_DEADLINE_S, Incident, evidence_before
from console.ops.status import layout_of_unit, running_layout, unit_states
from console.ops.switch.events import READY, REFUSED, ResultEvent, StepEvent, SwitchEvent, SwitchResult
from console.ops.switch.locks import ServiceBusy, switch_locks
from console.ops.switch.start_follow import StartFollower

STOPPED = "stopped"
NOTHING = "nothing-running"


async def running_unit(host: Host, service: ServiceConfig, audit: AuditLog | None) -> tuple[str | None, str | None]:
    """(unit, layout name) of what the service runs now, or (None, None)."""
    return running_layout(host.name, service, await unit_states(host, service), audit)


async def restartable_unit(host: Host, service: ServiceConfig,
                           audit: AuditLog | None) -> tuple[str | None, str | None]:
    """(unit, layout name) a restart acts on: the running unit, else the one that failed last (as
    `systemctl restart` brings a failed unit back), or (None, None)."""
    states = await unit_states(host, service)
    unit, layout = running_layout(host.name, service, states, audit)
    if unit is not None:
        return unit, layout
    failed = sorted((s for s in states if s.is_failed), key=lambda s: s.since or 0.0)
    if not failed:
        return None, None
    return failed[-1].unit, layout_of_unit(host.name, service, failed[-1].unit, audit)


async def stop_service(host: Host, service: ServiceConfig, *, audit: AuditLog | None = None,
                       evidence_s: float = EVIDENCE_DEADLINE_S) -> SwitchResult:
    """Stop the service's running unit and wait until it has stopped (outcome `stopped`), or say that
    nothing runs (`nothing-running`); `refused` while a switch or an explore of it holds the lock.
    A service in an incident has its evidence collected first (`evidence_s` at most)."""
    t0 = time.monotonic()
    evidence = await evidence_before(host, service, "stop", deadline_s=evidence_s)
    result = await _stop(host, service, audit, t0)
    return dataclasses.replace(result, evidence=str(evidence.path)) if evidence is not None else result


async def _stop(host: Host, service: ServiceConfig, audit: AuditLog | None, t0: float) -> SwitchResult:
    unit, layout = await running_unit(host, service, audit)
    nodes = node_hosts(host, service) if service.cluster is not None else [host]
    running = [(node, s.unit) for node in reversed(nodes) for s in await unit_states(node, service) if s.is_running]
    unit = unit or (running[0][1] if running else None)  # a worker left running without its head
    base = dict(host=host.name, service=service.name, layout=layout or "-", unit=unit)
    if not running:
        return SwitchResult(**base, outcome=NOTHING, reason=f"no unit of {service.name} is running")
    try:
        async with switch_locks(host, service):
            for node, name in running:  # over several hosts: the workers first, the head last
                await node.services.stop(name)
    except ServiceBusy as exc:
        return SwitchResult(**base, outcome=REFUSED, reason=str(exc))
    where = "" if len(nodes) == 1 else f" on {', '.join(dict.fromkeys(n.name for n, _ in running))}"
    return SwitchResult(
        **base, outcome=STOPPED, reason=f"{unit} stopped{where}; {service.name} is not serving",
        elapsed_s=time.monotonic() - t0,
    )  # fmt: skip


async def restart_service(
    host: Host,
    service: ServiceConfig,
    *,
    audit: AuditLog | None = None,
    on_event: Callable[[SwitchEvent], None] | None = None,
    timeout_s: float = 900.0,
    state_poll_s: float = 0.1,
    health_poll_s: float = 0.5,
    evidence_s: float = EVIDENCE_DEADLINE_S,
) -> SwitchResult:
    """Restart the running unit, or the one that failed, and watch it to READY, FAILED (with its cause)
    or TIMEOUT. A service in an incident has its evidence collected first (`evidence_s` at most)."""
    emit = on_event or (lambda _e: None)
    t0 = time.monotonic()

    def collecting(incident: Incident) -> None:
        emit(StepEvent(layout="-", elapsed_s=time.monotonic() - t0, step="evidence",
                       detail=f"keeping the evidence of {incident.reason} ({evidence_s:g} s at most)"))

    evidence = await evidence_before(host, service, "restart", deadline_s=evidence_s, on_incident=collecting)
    if evidence is not None:
        emit(StepEvent(layout="-", elapsed_s=time.monotonic() - t0, step="evidence", detail=evidence.words()))
    path = str(evidence.path) if evidence is not None else None

    def with_evidence(result: SwitchResult) -> SwitchResult:
        return dataclasses.replace(result, evidence=path) if path is not None else result

    def emit_result(event: SwitchEvent) -> None:  # the result line carries the evidence's path too
        if isinstance(event, ResultEvent) and event.result is not None:
            event = dataclasses.replace(event, result=with_evidence(event.result))
        emit(event)

    result = await _restart(host, service, audit, emit_result, t0, timeout_s, state_poll_s, health_poll_s,
                            emit_result if on_event is not None else None)
    return with_evidence(result)


async def _restart(host: Host, service: ServiceConfig, audit: AuditLog | None, emit: Callable[[SwitchEvent], None],
                   t0: float, timeout_s: float, state_poll_s: float, health_poll_s: float,
                   on_event: Callable[[SwitchEvent], None] | None) -> SwitchResult:
    unit, layout = await restartable_unit(host, service, audit)
    lc = service.layout(layout) if layout else None
    if lc is not None and lc.nodes > 1:  # every node stopped and started again in order, as a switch does
        from console.ops.switch.orchestrate import switch_layout

        return await switch_layout(host, service, lc, audit=audit, on_event=on_event, timeout_s=timeout_s,
                                   rollback=False, state_poll_s=state_poll_s, health_poll_s=health_poll_s)  # fmt: skip
    name = layout or (unit or "-")
    if unit is None:
        result = SwitchResult(host=host.name, service=service.name, layout=name, outcome=NOTHING,
                              reason=f"no unit of {service.name} is running or failed; nothing to restart")  # fmt: skip
        return result  # no events: nothing happened
    started_at = time.time()
    try:
        async with switch_locks(host, service):
            cursor = None
            async for entry in host.services.journal(unit, follow=False, lines=1):
                cursor = entry.cursor
            emit(StepEvent(layout=name, elapsed_s=time.monotonic() - t0, step="restart",
                           detail=f"restarting {unit}", unit=unit))  # fmt: skip
            await host.services.restart(unit)
            emit(StepEvent(layout=name, elapsed_s=time.monotonic() - t0, step="watch",
                           detail="watching journal, unit state and health", unit=unit))  # fmt: skip
            watch = StartFollower(host, service, unit, layout=name, emit=emit, started_mono=t0,
                               state_poll_s=state_poll_s, health_poll_s=health_poll_s)  # fmt: skip
            verdict = await watch.run(after_cursor=cursor, timeout_s=timeout_s)
    except ServiceBusy as exc:
        result = SwitchResult(host=host.name, service=service.name, layout=name, outcome=REFUSED, unit=unit,
                              reason=str(exc))  # fmt: skip
        emit(ResultEvent(layout=name, elapsed_s=time.monotonic() - t0, result=result))
        return result
    result = SwitchResult(
        host=host.name, service=service.name, layout=name, outcome=verdict.outcome, reason=verdict.reason,
        from_layout=layout, unit=unit, failure=verdict.failure, detected_after_s=verdict.detected_after_s,
        elapsed_s=time.monotonic() - t0, phase=verdict.phase.value, started_at=started_at,
        verdict_at=verdict.verdict_at, extra={"action": "restart"}, port_open_s=verdict.port_open_s,
        http_ready_s=verdict.http_ready_s, first_token_s=verdict.first_token_s,
    )  # fmt: skip
    emit(ResultEvent(layout=name, elapsed_s=result.elapsed_s, result=result))
    return result


__all__ = ["READY", "NOTHING", "STOPPED", "restart_service", "restartable_unit", "running_unit", "stop_service"]
