"""Comparing layouts from their probes: the best by a pick rule, and the Pareto frontier.

Pure functions over typed level figures (`LevelFigures`, read from a live probe or a stored `probe --json`
line), so the explore, `serve-console results` and the TUI rank layouts the same way.
- `throughput` (default): the highest aggregate output tok/s at the top concurrency measured;
- `c1`: the highest tok/s per user (1000 / mean TPOT) at the lowest concurrency measured;
- `ttft-slo:MS`: the highest aggregate at any level whose p99 TTFT is at most MS.

The frontier is aiconfigurator's and `vllm bench sweep plot_pareto`'s: each (layout, concurrency) point
as tok/s per user against tok/s per GPU, keeping the points no other point beats on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.errors import UsageError
from console.ops.explore.probe_metrics import level_ok, stall_why

if TYPE_CHECKING:
    from console.ops.explore.probe_metrics import ProbeResult

THROUGHPUT, C1, TTFT_SLO = "throughput", "c1", "ttft-slo"


def _figure(line: Mapping[str, Any], key: str) -> float | None:
    value = line.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class LevelFigures:
    """What comparing layouts needs of one probe level (None where it was not measured)."""

    concurrency: int
    """0 for an open-loop level without a concurrency cap."""
    output_throughput: float | None
    per_user_tokens_per_s: float | None
    median_ttft_ms: float | None
    p99_ttft_ms: float | None
    mean_tpot_ms: float | None
    completed: int
    failed: int
    why: str | None = None
    """Why the level measured nothing of the layout (it ran through a stall: `stall_why`)."""

    @property
    def ok(self) -> bool:
        """False for a failed level (see `level_ok`) and for one that ran through a stall."""
        return level_ok(self.completed, self.failed) and self.why is None

    @classmethod
    def of(cls, level: ProbeResult | Mapping[str, Any]) -> LevelFigures:
        """From a live probe level, or a stored `probe --json` line (keys it lacks read as None)."""
        if not isinstance(level, Mapping):
            s = level.summary
            return cls(s.concurrency or 0, s.output_throughput, s.per_user_tokens_per_s, s.ttft.median_ms,
                       s.ttft.p99_ms, s.tpot.mean_ms, s.completed, s.failed, s.why)
        # The stored line says why; a line without the key still carries its longest gap.
        why = level.get("why") if isinstance(level.get("why"), str) else stall_why(_figure(level, "max_itl_ms"))
        return cls(int(_figure(level, "concurrency") or 0), _figure(level, "output_throughput"),
                   _figure(level, "per_user_tokens_per_s"), _figure(level, "median_ttft_ms"),
                   _figure(level, "p99_ttft_ms"), _figure(level, "mean_tpot_ms"),
                   int(_figure(level, "completed") or 0), int(_figure(level, "failed") or 0), why)


Levels = Mapping[int, LevelFigures]
"""A layout's probe levels by concurrency."""


@dataclass(frozen=True, slots=True)
class Pick:
    """How the best layout is chosen."""

    rule: str = THROUGHPUT
    ttft_slo_ms: float | None = None

    def __str__(self) -> str:
        return f"{TTFT_SLO}:{self.ttft_slo_ms:g}" if self.rule == TTFT_SLO else self.rule

    def describe(self) -> str:
        """The rule in words, as the explore's result names it."""
        if self.rule == C1:
            return "c1, the highest tok/s per user at the lowest concurrency"
        if self.rule == TTFT_SLO:
            return f"{self}, the highest aggregate tok/s at a level whose p99 TTFT is at most {self.ttft_slo_ms:g} ms"
        return f"{self}, the highest aggregate tok/s at the top concurrency"


def parse_pick(text: str) -> Pick:
    """`throughput`, `c1` or `ttft-slo:MS`.

    Raises:
        UsageError: anything else.
    """
    if text in (THROUGHPUT, C1):
        return Pick(text)
    rule, _, value = text.partition(":")
    if rule == TTFT_SLO:
        try:
            slo = float(value)
        except ValueError:
            slo = 0.0
        if slo > 0:
            return Pick(TTFT_SLO, slo)
    raise UsageError(f"--pick {text!r}: use throughput, c1 or ttft-slo:MS (MS > 0)")


def levels_of(levels: Iterable[ProbeResult | Mapping[str, Any]]) -> dict[int, LevelFigures]:
    """Probe levels by concurrency, the newest of each level winning."""
    out: dict[int, LevelFigures] = {}
    for level in levels:
        figures = LevelFigures.of(level)
        out[figures.concurrency] = figures
    return dict(sorted(out.items()))


def score(levels: Levels, pick: Pick) -> float | None:
    """The layout's figure under `pick` (higher is better), or None when it has none.

    Failed levels (no request succeeded) are left out: they measured nothing."""
    levels = {c: level for c, level in levels.items() if level.ok}
    if not levels:
        return None
    if pick.rule == C1:
        return levels[min(levels)].per_user_tokens_per_s
    if pick.rule == TTFT_SLO:
        ok = [level.output_throughput or 0.0 for level in levels.values()
              if level.p99_ttft_ms is not None and level.p99_ttft_ms <= (pick.ttft_slo_ms or 0)]
        return max(ok) if ok else None
    return levels[max(levels)].output_throughput


def best_layout(by_layout: Mapping[str, Levels], pick: Pick) -> str | None:
    """The layout with the highest score (the first one listed on a tie), or None."""
    best, best_score = None, None
    for layout, levels in by_layout.items():
        value = score(levels, pick)
        if value is not None and (best_score is None or value > best_score):
            best, best_score = layout, value
    return best


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One (layout, concurrency) point of the frontier."""

    layout: str
    concurrency: int
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float

    def to_json(self) -> dict[str, Any]:
        return {"layout": self.layout, "concurrency": self.concurrency,
                "tokens_per_s_per_user": round(self.tokens_per_s_per_user, 2),
                "tokens_per_s_per_gpu": round(self.tokens_per_s_per_gpu, 2)}


def pareto_frontier(by_layout: Mapping[str, Levels], gpus: Mapping[str, int]) -> list[ParetoPoint]:
    """The points no other point beats on both tok/s per user and tok/s per GPU, fastest per user first."""
    points = []
    for layout, levels in by_layout.items():
        for concurrency, level in levels.items():
            per_user, aggregate = level.per_user_tokens_per_s, level.output_throughput
            if per_user and aggregate:
                points.append(ParetoPoint(layout, concurrency, per_user, aggregate / max(gpus.get(layout, 1), 1)))
    frontier = [
        p for p in points
        if not any(q.tokens_per_s_per_user >= p.tokens_per_s_per_user
                   and q.tokens_per_s_per_gpu >= p.tokens_per_s_per_gpu
                   and (q.tokens_per_s_per_user, q.tokens_per_s_per_gpu) != (p.tokens_per_s_per_user, p.tokens_per_s_per_gpu)
                   for q in points)
    ]  # fmt: skip
    return sorted(frontier, key=lambda p: -p.tokens_per_s_per_user)
