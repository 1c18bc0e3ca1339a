"""One JSON encoder (and decoder) for every switch event: the shape `switch --json` prints.

Every event's JSON has `event` (its kind), `layout`, `rollback` and `elapsed_s`, then its own fields;
a nested value (a finding, a unit state, a health sample) is flattened into the same object. The
decoder reads those lines back into typed events (a recorded switch, replayed into the TUI).
"""

from __future__ import annotations

import enum
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

from console.domain.models import Finding, FindingClass, HealthSample, OomFigures, Phase, UnitState

if TYPE_CHECKING:
    from console.ops.events import SwitchEvent, SwitchResult

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
    from console.ops.events import ResultEvent

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
    return Finding(cls=FindingClass(data["class"]), line=data.get("line", ""), summary=data.get("summary", ""),
                   rank=data.get("rank"), fatal=data.get("fatal", True), oom=oom, ts=data.get("ts"))


def result_from_json(data: dict[str, Any]) -> SwitchResult:
    """A switch result back from its `{"event": "result", ...}` line (its rollback too)."""
    from console.ops.events import SwitchResult

    names = {f.name for f in fields(SwitchResult)}
    kept = {k: v for k, v in data.items() if k in names and k not in ("failure", "rollback")}
    failure = finding_from_json(data["failure"]) if data.get("failure") else None
    rollback = result_from_json(data["rollback"]) if data.get("rollback") else None
    return SwitchResult(**kept, failure=failure, rollback=rollback)


def event_from_json(data: dict[str, Any]) -> SwitchEvent:
    """A typed event back from one `switch --json` line."""
    from console.ops import events

    kind = data.get("event")
    if kind == "result":
        result = result_from_json(data)
        return events.ResultEvent(layout=result.layout, elapsed_s=result.elapsed_s, result=result)
    cls = next(c for c in events.EVENT_CLASSES if c.kind == kind)
    base = {"layout": data["layout"], "elapsed_s": data.get("elapsed_s") or 0.0, "rollback": bool(data.get("rollback"))}
    if cls is events.FindingEvent:
        return cls(**base, finding=finding_from_json(data))
    if cls is events.StateEvent:
        return cls(**base, state=UnitState(**{k: data.get(k) for k in _STATE_KEYS}))
    if cls is events.HealthEvent:
        sample = HealthSample(taken_at=0.0, status=data.get("status") or "down", http_status=data.get("http_status"))
        return cls(**base, sample=sample)
    own = {f.name: data[f.name] for f in fields(cls) if f.name in data and f.name not in base}
    if "phase" in own:
        own["phase"] = Phase(own["phase"])
    return cls(**base, **own)
