"""What a switch reports while it runs, and how it ended: small frozen values with a stable JSON shape.

Every event's JSON has `event` (its kind), `layout` (the layout being started), `rollback` (true while
rolling back) and `elapsed_s` (seconds since that start began).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from console.domain.values import Finding, FindingClass, HealthSample, OomFigures, Phase, UnitState

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
    node: str | None = None
    """The host it happened on, for a layout over several hosts (None for a layout on one host)."""

    kind = "event"

    def to_json(self) -> dict[str, Any]:
        """The event as `switch --json` prints it (one encoder for every kind: `event_json`)."""
        return event_json(self)


@dataclass(frozen=True, slots=True)
class StepEvent(SwitchEvent):
    """A step of the switch itself: preflight, stop, write, start, watch, rollback, evidence."""

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
    port_open_s: float | None = None
    """Seconds from the start to the engine's first HTTP answer to the console (any status)."""
    http_ready_s: float | None = None
    """... to HTTP ready (the engine's ready line or `/health` 200)."""
    first_token_s: float | None = None
    """... to the first token of a streamed one-token completion (`first_token_check`)."""
    evidence: str | None = None
    """The incident's evidence folder (ops/evidence), when the service was in one or this start failed."""
    bundle: str | None = None
    """The incident bundle of a failed start (ops/bundle, docs/bundle.md), when one was written."""
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
            "port_open_s": _round(self.port_open_s),
            "http_ready_s": _round(self.http_ready_s),
            "first_token_s": _round(self.first_token_s),
            "forced": self.forced,
            "fit": self.fit,
            "rollback": None,
            "audit_id": self.audit_id,
            "evidence": self.evidence,
            "bundle": self.bundle,
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


# -- one JSON encoder (and decoder) for every event: the shape `switch --json` prints -----------------
#: Rounding of float fields in JSON, by name (times to the millisecond, progress to 0.01%).
_DIGITS = {"elapsed_s": 3, "progress": 4, "detected_after_s": 3}
#: What a nested value contributes to its event's JSON.
_STATE_KEYS = ("unit", "active", "sub", "result", "main_pid")
_HEALTH_KEYS = ("status", "http_status")
_OOM_KEYS = tuple(f.name for f in fields(OomFigures))


def _scalar(name: str, value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and name in _DIGITS:
        return round(value, _DIGITS[name])
    return value


def _flatten(annotation: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Finding):
        return value.to_json()
    keys = _STATE_KEYS if "UnitState" in annotation else _HEALTH_KEYS if "HealthSample" in annotation else ()
    return {key: getattr(value, key) if value is not None else None for key in keys}


def event_json(event: SwitchEvent) -> dict[str, Any]:
    """The event as one JSON object (a result event is its result's JSON)."""
    if isinstance(event, ResultEvent):
        assert event.result is not None
        return event.result.to_json()
    out: dict[str, Any] = {"event": event.kind, "layout": event.layout, "rollback": event.rollback,
                           "elapsed_s": _scalar("elapsed_s", event.elapsed_s)}
    for f in fields(event):
        if f.name in out:
            continue
        value = getattr(event, f.name)
        if is_dataclass(value) or (value is None and any(t in str(f.type) for t in ("Finding", "State", "Sample"))):
            out.update(_flatten(str(f.type), value))
        else:
            out[f.name] = _scalar(f.name, value)
    return out


def finding_from_json(data: dict[str, Any]) -> Finding:
    """A finding back from its `to_json()` shape."""
    oom = OomFigures(**{k: data.get(k) for k in _OOM_KEYS}) if data.get("class") == "cuda_oom" else None
    context = FindingClass(data["context"]) if data.get("context") else None
    return Finding(cls=FindingClass(data["class"]), line=data.get("line", ""), summary=data.get("summary", ""),
                   rank=data.get("rank"), fatal=data.get("fatal", True), oom=oom, ts=data.get("ts"),
                   hint=data.get("hint"), context=context)


def result_from_json(data: dict[str, Any]) -> SwitchResult:
    """A switch result back from its `{"event": "result", ...}` line (its rollback too)."""
    names = {f.name for f in fields(SwitchResult)}
    kept = {k: v for k, v in data.items() if k in names and k not in ("failure", "rollback")}
    failure = finding_from_json(data["failure"]) if data.get("failure") else None
    rollback = result_from_json(data["rollback"]) if data.get("rollback") else None
    return SwitchResult(**kept, failure=failure, rollback=rollback)


def event_from_json(data: dict[str, Any]) -> SwitchEvent:
    """A typed event back from one `switch --json` line."""
    kind = data.get("event")
    if kind == "result":
        result = result_from_json(data)
        return ResultEvent(layout=result.layout, elapsed_s=result.elapsed_s, result=result)
    cls = next(c for c in EVENT_CLASSES if c.kind == kind)
    base = {"layout": data["layout"], "elapsed_s": data.get("elapsed_s") or 0.0, "rollback": bool(data.get("rollback"))}
    if cls is FindingEvent:
        return cls(**base, finding=finding_from_json(data))
    if cls is StateEvent:
        return cls(**base, state=UnitState(**{k: data.get(k) for k in _STATE_KEYS}))
    if cls is HealthEvent:
        sample = HealthSample(taken_at=0.0, status=data.get("status") or "down", http_status=data.get("http_status"))
        return cls(**base, sample=sample)
    own = {f.name: data[f.name] for f in fields(cls) if f.name in data and f.name not in base}
    if "phase" in own:
        own["phase"] = Phase(own["phase"])
    return cls(**base, **own)
