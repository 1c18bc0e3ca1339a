"""A failed switch freezes its incident into a bundle (ops/bundle): the switch records its events as it
emits them, on the wall clock, and hands them, its verdict and its card to the bundle's writer."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

from console.config import ServiceConfig
from console.hosts.base import Host
from console.hosts.state_dir import state_dir
from console.ops.bundle import WRITE_DEADLINE_S, Incident, bundle_path, write_bundle
from console.ops.switch.events import FAILED, TIMEOUT, SwitchEvent, SwitchResult
from console.ops.switch.failure_text import failure_rows, headline
from console.ops.switch.starter_protocol import EventSink


class EventRecorder:
    """An event sink that keeps (wall-clock time, JSON) of every event before passing it on."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink
        self.events: list[tuple[float, dict[str, Any]]] = []

    def __call__(self, event: SwitchEvent) -> None:
        self.events.append((time.time(), event.to_json()))
        self.sink(event)


async def with_bundle(host: Host, service: ServiceConfig, result: SwitchResult, recorder: EventRecorder) -> SwitchResult:
    """The result with its bundle's path, when its start failed or timed out and the bundle was written
    (WRITE_DEADLINE_S at most; a bundle that cannot be had never changes the switch's outcome)."""
    if result.outcome not in (FAILED, TIMEOUT):
        return result
    kind = result.failure.cls.value if result.failure is not None else result.outcome
    ended = result.rollback.started_at if result.rollback is not None and result.rollback.started_at else None
    incident = Incident(kind=kind, reason=result.reason, unit=result.unit, started_at=result.started_at,
                        verdict_at=result.verdict_at or time.time(), ended_at=ended)
    with contextlib.suppress(Exception):
        path = bundle_path(state_dir(), host.name, service.name, incident)
        done = replace(result, bundle=str(path))
        card = [{"label": r.label, "value": r.value, "tone": r.tone} for r in failure_rows(done)]
        await asyncio.wait_for(write_bundle(host, service, incident, path, events=recorder.events,
                                            result=done.to_json(), card=card, headline=headline(done),
                                            evidence=done.evidence, before_s=host.config.bundle_before_s,
                                            after_s=host.config.bundle_after_s), WRITE_DEADLINE_S)
        return done
    return result
