"""Comparing layouts from their probes: the best by a pick rule, and the Pareto frontier.

Pure functions over `probe --json` lines (dicts), so the explore, `serve-console results` and the TUI
rank layouts the same way.
- `throughput` (default): the highest aggregate output tok/s at the top concurrency measured;
- `c1`: the highest tok/s per user (1000 / mean TPOT) at the lowest concurrency measured;
- `ttft-slo:MS`: the highest aggregate at any level whose p99 TTFT is at most MS.

The frontier is aiconfigurator's and `vllm bench sweep plot_pareto`'s: each (layout, concurrency) point
as tok/s per user against tok/s per GPU, keeping the points no other point beats on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from console.errors import UsageError

THROUGHPUT, C1, TTFT_SLO = "throughput", "c1", "ttft-slo"

Levels = Mapping[int, Mapping[str, Any]]
"""A layout's probe lines by concurrency (0 for an open-loop level without a concurrency cap)."""


@dataclass(frozen=True, slots=True)
class Pick:
    """How the best layout is chosen."""

    rule: str = THROUGHPUT
    ttft_slo_ms: float | None = None

    def __str__(self) -> str:
        return f"{TTFT_SLO}:{self.ttft_slo_ms:g}" if self.rule == TTFT_SLO else self.rule


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


def levels_of(lines: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Probe lines by concurrency, the newest line of each level winning."""
    out: dict[int, Mapping[str, Any]] = {}
    for line in lines:
        out[int(line.get("concurrency") or 0)] = line
    return dict(sorted(out.items()))


def score(levels: Levels, pick: Pick) -> float | None:
    """The layout's figure under `pick` (higher is better), or None when it has none."""
    if not levels:
        return None
    if pick.rule == C1:
        return levels[min(levels)].get("per_user_tokens_per_s")
    if pick.rule == TTFT_SLO:
        ok = [line.get("output_throughput") or 0.0 for line in levels.values()
              if line.get("p99_ttft_ms") is not None and line["p99_ttft_ms"] <= (pick.ttft_slo_ms or 0)]
        return max(ok) if ok else None
    return levels[max(levels)].get("output_throughput")


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
        for concurrency, line in levels.items():
            per_user, aggregate = line.get("per_user_tokens_per_s"), line.get("output_throughput")
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
