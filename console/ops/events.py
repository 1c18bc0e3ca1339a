"""What a switch reports while it runs, and how it ended: small frozen values with a stable JSON shape.

Every event's JSON has `event` (its kind), `layout` (the layout being started), `rollback` (true while
rolling back) and `elapsed_s` (seconds since that start began).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.domain.models import Finding, HealthSample, Phase, UnitState

READY = "ready"
FAILED = "failed"
TIMEOUT = "timeout"
REFUSED = "refused"
UNCHANGED = "unchanged"
"""The layout asked for was already running and ready, and nothing was done (`switch` without --restart)."""


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True)
class SwitchEvent:
    """Fields every event carries."""

    layout: str
    elapsed_s: float
    rollback: bool = False

    kind = "event"

    def to_json(self) -> dict[str, Any]:
        """The event as `switch --json` prints it (one encoder for every kind)."""
        from console.ops.event_json import event_json

        return event_json(self)


@dataclass(frozen=True, slots=True)
class StepEvent(SwitchEvent):
    """A step of the switch itself: preflight, stop, write, reset-failed, start, watch, rollback."""

    step: str = ""
    detail: str = ""
    unit: str | None = None

    kind = "step"


@dataclass(frozen=True, slots=True)
class PhaseEvent(SwitchEvent):
    """The engine reached a start-up phase (from its log)."""

    phase: Phase = Phase.STARTING
    detail: str = ""
    rank: str | None = None
    ts: float | None = None

    kind = "phase"


@dataclass(frozen=True, slots=True)
class ProgressEvent(SwitchEvent):
    """Progress within a phase, 0..1 (checkpoint shards loaded)."""

    phase: Phase = Phase.LOADING_WEIGHTS
    progress: float = 0.0
    detail: str = ""
    ts: float | None = None

    kind = "progress"


@dataclass(frozen=True, slots=True)
class FindingEvent(SwitchEvent):
    """Triage recognised a line (a failure, or a harmless warning when `fatal` is false)."""

    finding: Finding | None = None

    kind = "finding"


@dataclass(frozen=True, slots=True)
class StateEvent(SwitchEvent):
    """The unit's state changed."""

    state: UnitState | None = None

    kind = "state"


@dataclass(frozen=True, slots=True)
class HealthEvent(SwitchEvent):
    """The health probe's verdict changed (down, starting, ready)."""

    sample: HealthSample | None = None

    kind = "health"


@dataclass(frozen=True, slots=True)
class SwitchResult:
    """How a switch ended, and how its rollback ended."""

    host: str
    service: str
    layout: str
    outcome: str
    """ready | failed | timeout | refused | unchanged"""
    reason: str = ""
    from_layout: str | None = None
    unit: str | None = None
    failure: Finding | None = None
    detected_after_s: float | None = None
    """Seconds from the decisive journal entry (or state change, or probe) to the verdict."""
    elapsed_s: float = 0.0
    phase: str | None = None
    """The last start-up phase the engine reached."""
    forced: bool = False
    fit: dict[str, Any] | None = None
    rollback: SwitchResult | None = None
    audit_id: int | None = None
    started_at: float = 0.0
    verdict_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome == READY

    def to_json(self) -> dict[str, Any]:
        """The `{"event": "result", ...}` line of `switch --json` (the rollback nested, without `event`)."""
        out = {
            "event": "result",
            "outcome": self.outcome,
            "host": self.host,
            "service": self.service,
            "layout": self.layout,
            "from_layout": self.from_layout,
            "unit": self.unit,
            "reason": self.reason,
            "failure": self.failure.to_json() if self.failure else None,
            "detected_after_s": _round(self.detected_after_s),
            "elapsed_s": _round(self.elapsed_s),
            "phase": self.phase,
            "forced": self.forced,
            "fit": self.fit,
            "rollback": None,
            "audit_id": self.audit_id,
        }
        if self.rollback is not None:
            nested = self.rollback.to_json()
            nested.pop("event")
            out["rollback"] = nested
        return out


@dataclass(frozen=True, slots=True)
class ResultEvent(SwitchEvent):
    """The switch ended (emitted once per start, the rollback's too)."""

    result: SwitchResult | None = None

    kind = "result"


EVENT_CLASSES = (StepEvent, PhaseEvent, ProgressEvent, FindingEvent, StateEvent, HealthEvent, ResultEvent)
