"""One service's comparison of layouts, from the stored probes and explore outcomes.

Per layout: tok/s per user at concurrency 1, the aggregate at each concurrency, TTFT p50/p99 and TPOT
at the top concurrency, the fit's headroom, the newest outcome and when; the best marked; and the
Pareto frontier of tok/s per user against tok/s per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from console.config import HostConfig, ServiceConfig
from console.domain.layout import gpus_used
from console.ops.explore.report import FAILED, MEASURED
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.results_table import (
    LevelFigures,
    ParetoPoint,
    Pick,
    best_layout,
    levels_of,
    pareto_frontier,
)
from console.ops.fit_check import fit_layout, gpu_capacity


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """One layout's line of the comparison."""

    layout: str
    gpus: int
    levels: dict[int, LevelFigures]
    headroom_gib: float | None
    fit_verdict: str | None
    outcome: str | None
    when: float | None
    best: bool = False
    why: str | None = None
    """Why the newest probe measured nothing (it ran through a stall), when it did not."""

    def at(self, concurrency: int | None, key: str) -> Any:
        level = self.levels.get(concurrency) if concurrency is not None else None
        return None if level is None else getattr(level, key)

    @property
    def top(self) -> int | None:
        return max(self.levels) if self.levels else None

    @property
    def c1_per_user(self) -> float | None:
        return self.at(1, "per_user_tokens_per_s")

    def to_json(self) -> dict[str, Any]:
        top = self.top
        return {
            "layout": self.layout, "gpus": self.gpus, "best": self.best, "outcome": self.outcome, "why": self.why,
            "fit_verdict": self.fit_verdict, "headroom_gib": self.headroom_gib, "when": self.when,
            "c1_tokens_per_s_per_user": self.c1_per_user,
            "aggregate_tokens_per_s": {str(c): level.output_throughput for c, level in self.levels.items()},
            "top_concurrency": top,
            "median_ttft_ms": self.at(top, "median_ttft_ms"),
            "p99_ttft_ms": self.at(top, "p99_ttft_ms"),
            "mean_tpot_ms": self.at(top, "mean_tpot_ms"),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class ServiceResults:
    """The comparison of one service's layouts."""

    host: str
    service: str
    rows: tuple[LayoutRow, ...]
    best: str | None
    pick: Pick
    pareto: tuple[ParetoPoint, ...]

    @property
    def concurrencies(self) -> list[int]:
        return sorted({c for row in self.rows for c in row.levels})

    @property
    def mixed_tops(self) -> bool:
        """Whether the layouts' top concurrencies differ: their TTFT and TPOT are then not comparable."""
        return len({row.top for row in self.rows if row.top is not None}) > 1

    def to_json(self) -> dict[str, Any]:
        return {"event": "results", "host": self.host, "service": self.service, "pick": str(self.pick),
                "best": self.best, "layouts": [r.to_json() for r in self.rows],
                "pareto": [p.to_json() for p in self.pareto]}  # fmt: skip


def service_results(store: ResultsStore, host: HostConfig, service: ServiceConfig,
                    pick: Pick | None = None) -> ServiceResults:
    """The comparison from what the store holds; fit from the explore that recorded it, else from the
    config's GPU capacity (no host is contacted)."""
    pick = pick or Pick()
    probes = store.probes(host=host.name, service=service.name)
    outcomes = store.latest_outcomes(host.name, service.name)
    names = [lc.name for lc in service.layouts]
    names += sorted({p.layout for p in probes if p.layout and p.layout not in names})
    capacity = gpu_capacity(host)
    rows = []
    for name in names:
        mine = [p for p in probes if p.layout == name]
        outcome = outcomes.get(name)
        lc = service.layout(name)
        fit = outcome.fit if outcome is not None and outcome.fit else None
        if fit is None and lc is not None:
            try:
                predicted = fit_layout(service, lc, capacity)
            except Exception:  # an unreadable model config leaves the column empty, never the table
                predicted = None
            fit = predicted.to_json() if predicted is not None else None
        when = max([p.taken_at for p in mine] + ([outcome.finished_at] if outcome else []), default=None)
        newest_probe = max(mine, key=lambda p: p.taken_at, default=None)
        said, why = (outcome.outcome if outcome else None), None
        if newest_probe is not None and (outcome is None or newest_probe.taken_at > outcome.finished_at):
            # a probe in which every request failed, or that ran through a stall, measured nothing
            newest = LevelFigures.of(newest_probe.result)
            said, why = (MEASURED, None) if newest.ok else (FAILED, newest.why)
        if not mine and outcome is None:
            continue
        rows.append(LayoutRow(  # only the levels that measured the layout are its figures
            layout=name, gpus=gpus_used(lc.layout, service.engine) if lc else 1,
            levels=dict(levels_of(p.result for p in mine if LevelFigures.of(p.result).ok)),
            headroom_gib=(fit or {}).get("headroom_gib"), fit_verdict=(fit or {}).get("verdict"), outcome=said,
            when=when, why=why,
        ))  # fmt: skip
    by_layout = {r.layout: r.levels for r in rows if r.levels}
    best = best_layout(by_layout, pick)
    rows = [replace(r, best=r.layout == best) for r in rows]
    pareto = pareto_frontier(by_layout, {r.layout: r.gpus for r in rows})
    return ServiceResults(host.name, service.name, tuple(rows), best, pick, tuple(pareto))
