"""Serving, idle, stalled or unknown: the verdict on one service's progress, reading after reading.

A reading is compared with the memory of the one before (kept by the caller: in memory by the open
console and the watch daemon, in the state dir by a one-shot `status`). Progress is a per-step series
that grew, a journal line that proves a step, or, with a request running, KV usage rising (a long
chunked prefill moves no token counter until its last chunk: slow, not stalled). Work is pending when a
request runs or waits, when one of the console's own is in flight, or when a canary timed out, even
while the running gauge reads 0. Stalled: work pending and no progress for `stall_after_s`. A start
before READY is never stalled; nothing pending and nothing moving is idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.domain.progress.reading import ProgressReading

SERVING, IDLE, STALLED, UNKNOWN = "serving", "idle", "stalled", "unknown"
#: Work pending and no progress for this long is a stall (the issue asks at most 20 s).
STALL_AFTER_S = 20.0
#: A ready service with nothing pending this long gets a canary (one one-token streamed request).
CANARY_EVERY_S = 60.0
#: The canary's first token must come within this long.
CANARY_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Pending:
    """What waits on the engine: its own gauges (or journal) and the console's own requests."""

    running: int = 0
    waiting: int = 0
    ours: int = 0

    @property
    def any(self) -> bool:
        return bool(self.running or self.waiting or self.ours)

    def words(self) -> str:
        parts = [f"{self.running} running", f"{self.waiting} waiting"]
        if self.ours:
            parts.append(f"{self.ours} of ours in flight")
        return ", ".join(parts)

    def to_json(self) -> dict[str, int]:
        return {"running": self.running, "waiting": self.waiting, "ours": self.ours}


@dataclass(frozen=True, slots=True)
class ProgressMemory:
    """What the judge keeps between two readings of one engine (a JSON object in the state dir)."""

    engine_key: str
    state: str
    since: float
    last_progress_at: float | None = None
    pending_since: float | None = None
    counters: tuple[tuple[str, float], ...] = ()
    kv_usage: float | None = None
    log_moved_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "engine_key": self.engine_key, "state": self.state, "since": self.since,
            "last_progress_at": self.last_progress_at, "pending_since": self.pending_since,
            "counters": dict(self.counters), "kv_usage": self.kv_usage, "log_moved_at": self.log_moved_at,
        }  # fmt: skip

    @classmethod
    def from_json(cls, doc: object) -> ProgressMemory | None:
        """The memory a state file held, or None when it is not one (a torn or foreign file starts afresh)."""
        if not isinstance(doc, dict):
            return None
        try:
            counters = doc.get("counters") or {}
            return cls(
                engine_key=str(doc["engine_key"]),
                state=str(doc["state"]),
                since=float(doc["since"]),
                last_progress_at=_opt_float(doc.get("last_progress_at")),
                pending_since=_opt_float(doc.get("pending_since")),
                counters=tuple((str(k), float(v)) for k, v in counters.items()),
                kv_usage=_opt_float(doc.get("kv_usage")),
                log_moved_at=_opt_float(doc.get("log_moved_at")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ServingVerdict:
    """The `serving` object of a `status --json` line, and the memory for the next reading."""

    state: str
    since: float
    last_progress_at: float | None
    pending: Pending
    reason: str
    memory: ProgressMemory
    ranks: tuple[str, ...] = ()
    """The ranks that differ from the rest, named (`GPU 3`), during a stall; empty when all look alike."""
    ranks_words: str | None = None
    evidence: str | None = None
    signals: tuple[str, ...] = field(default=())
    """The series and lines the verdict was read from."""

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": round(self.since, 3),
            "last_progress_at": None if self.last_progress_at is None else round(self.last_progress_at, 3),
            "pending": self.pending.to_json(),
            "reason": self.reason,
            "ranks": list(self.ranks),
            "evidence": self.evidence,
        }

    def words(self) -> str:
        """The plain `serving:` line's text."""
        line = f"{self.state.upper()}, {self.reason}"
        if self.ranks_words and self.state == STALLED:
            line += f"; {self.ranks_words}"
        return line


def _grown(before: tuple[tuple[str, float], ...], now: tuple[tuple[str, float], ...]) -> list[str]:
    old = dict(before)
    return [f"{name} +{value - old[name]:g}" if value > old[name] else f"{name} reset"
            for name, value in now if name in old and value != old[name]]  # fmt: skip


def _pending(reading: ProgressReading) -> Pending:
    def n(value: float | None) -> int:
        return max(0, round(value)) if value is not None else 0

    return Pending(running=n(reading.running), waiting=n(reading.waiting), ours=max(0, reading.ours))


def judge(
    memory: ProgressMemory | None,
    reading: ProgressReading,
    *,
    engine_key: str,
    stall_after_s: float = STALL_AFTER_S,
) -> ServingVerdict:
    """The verdict on `reading`, given the memory of the reading before it.

    Args:
        memory: the previous reading's memory; ignored when it was another engine's (`engine_key`).
        reading: this reading.
        engine_key: names the running engine (unit and main pid): a restart starts a fresh memory.
        stall_after_s: work pending and no progress this long is a stall.
    """
    now = reading.taken_at
    if memory is not None and memory.engine_key != engine_key:
        memory = None
    pending = _pending(reading)
    signals = tuple(name for name, _ in reading.counters)
    if not reading.ready:
        return _verdict(memory, reading, engine_key, UNKNOWN, now, None, None, pending,
                        "starting: not READY yet (a start is never stalled)", signals)
    grown = _grown(memory.counters, reading.counters) if memory is not None else []
    kv_rising = (memory is not None and memory.kv_usage is not None and reading.kv_usage is not None
                 and reading.kv_usage > memory.kv_usage and pending.running > 0)  # fmt: skip
    log_new = reading.log_moved_at is not None and (
        memory is None or memory.log_moved_at is None or reading.log_moved_at > memory.log_moved_at)
    candidates = [memory.last_progress_at if memory else None,
                  now if grown or kv_rising else None,
                  reading.log_moved_at]  # fmt: skip
    last = max((t for t in candidates if t is not None), default=None)
    work = pending.any or reading.canary_timed_out_s is not None or reading.health_failed is not None
    was_pending = memory.pending_since if memory is not None else None
    pending_since = (was_pending if was_pending is not None else now) if work else None
    moved = bool(grown) or kv_rising or (log_new and last is not None and now - last < stall_after_s)
    if moved:
        pending_since = now if work else None
    quiet_from = max((t for t in (last, pending_since) if t is not None), default=now)
    if reading.canary_timed_out_s is not None and not moved:
        reason = f"the canary's one-token request got no first token in {reading.canary_timed_out_s:.0f} s"
        return _verdict(memory, reading, engine_key, STALLED, quiet_from, last, pending_since, pending, reason,
                        signals)
    if reading.health_failed is not None and pending.any and not moved:
        reason = f"{reading.health_failed}, with work pending ({pending.words()})"
        return _verdict(memory, reading, engine_key, STALLED, quiet_from, last, pending_since, pending, reason,
                        signals)
    if moved:
        how = ", ".join(grown) or ("KV cache usage rising (a prefill, chunk by chunk)" if kv_rising
                                   else "the engine's batch lines")  # fmt: skip
        return _verdict(memory, reading, engine_key, SERVING, now, last, pending_since, pending,
                        f"progress: {how}", signals)
    if memory is not None and memory.state == STALLED:
        # a stall ends when tokens move, not when the gauges or our own requests stop saying so
        quiet_s = now - memory.since
        held = f"with work pending ({pending.words()}; " if work else "(a stall ends when tokens move; "
        reason = f"no progress for {quiet_s:.0f} s {held}{', '.join(signals) or 'the batch lines'} frozen)"
        return _verdict(memory, reading, engine_key, STALLED, memory.since, last, pending_since, pending, reason,
                        signals)
    if not work:
        return _verdict(memory, reading, engine_key, IDLE, now, last, None, pending,
                        "nothing pending, nothing moving", signals)
    if not reading.counters and reading.log_moved_at is None and memory is None:
        return _verdict(memory, reading, engine_key, UNKNOWN, now, last, pending_since, pending,
                        "no progress signal readable (no per-step series, no batch lines)", signals)
    quiet_s = now - quiet_from
    frozen = ", ".join(signals) or "the batch lines"
    if quiet_s >= stall_after_s:
        reason = f"no progress for {quiet_s:.0f} s with work pending ({pending.words()}; {frozen} frozen)"
        return _verdict(memory, reading, engine_key, STALLED, quiet_from, last, pending_since, pending, reason,
                        signals)
    reason = f"work pending ({pending.words()}), no progress for {quiet_s:.0f} s yet"
    return _verdict(memory, reading, engine_key, SERVING, now, last, pending_since, pending, reason, signals)


def _verdict(memory: ProgressMemory | None, reading: ProgressReading, engine_key: str, state: str, began: float,
             last: float | None, pending_since: float | None, pending: Pending, reason: str,
             signals: tuple[str, ...]) -> ServingVerdict:
    since = memory.since if memory is not None and memory.state == state else began
    kept = ProgressMemory(
        engine_key=engine_key, state=state, since=since, last_progress_at=last, pending_since=pending_since,
        counters=reading.counters or (memory.counters if memory else ()),
        kv_usage=reading.kv_usage if reading.kv_usage is not None else (memory.kv_usage if memory else None),
        log_moved_at=reading.log_moved_at if reading.log_moved_at is not None else (
            memory.log_moved_at if memory else None),
    )
    return ServingVerdict(state=state, since=since, last_progress_at=last, pending=pending, reason=reason,
                          memory=kept, signals=signals)
