"""What an explore reports: each layout's outcome as it ends, and the sweep's result at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.results_table import Pick

MEASURED, SKIPPED, FAILED, TIMEOUT, PRUNED = "measured", "skipped", "failed", "timeout", "pruned"


@dataclass(frozen=True, slots=True)
class ExploreOptions:
    """What an explore sweeps, and how it chooses."""

    layouts: tuple[str, ...]
    probe: ProbeOptions
    pick: Pick = field(default_factory=Pick)
    include_oom: bool = False
    return_to_start: bool = False
    switch_timeout_s: float = 900.0
    by_prediction: bool = False
    """Order the layouts by predicted speed and prune those whose optimistic bound cannot beat the best
    measured so far (`explore` without `--all`); False measures every layout in the order given."""

    def to_json(self) -> dict[str, Any]:
        return {"layouts": list(self.layouts), "probe": self.probe.to_json(), "pick": str(self.pick),
                "include_oom": self.include_oom, "return_to_start": self.return_to_start,
                "switch_timeout_s": self.switch_timeout_s, "by_prediction": self.by_prediction}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ExploreOptions:
        from console.ops.explore.results_table import parse_pick

        return cls(layouts=tuple(doc["layouts"]), probe=ProbeOptions.from_json(doc["probe"]),
                   pick=parse_pick(doc.get("pick", "throughput")), include_oom=bool(doc.get("include_oom")),
                   return_to_start=bool(doc.get("return_to_start")),
                   switch_timeout_s=float(doc.get("switch_timeout_s", 900.0)),
                   by_prediction=bool(doc.get("by_prediction")))  # fmt: skip


@dataclass(frozen=True, slots=True)
class LayoutReport:
    """How one layout of the sweep ended, with its figures."""

    layout: str
    outcome: str
    fit: dict[str, Any] | None
    failure: dict[str, Any] | None = None
    probes: tuple[dict[str, Any], ...] = ()
    """Its `probe --json` lines, one per concurrency."""
    switch_s: float = 0.0
    """Seconds in switches (the rollback's included)."""
    probe_s: float = 0.0
    elapsed_s: float = 0.0
    """Seconds for the whole layout, preflight to record."""
    predicted: tuple[dict[str, Any], ...] = ()
    """The performance model's prediction at each concurrency, made before the layout ran."""

    kind = "explore_layout"

    def to_json(self) -> dict[str, Any]:
        return {"layout": self.layout, "outcome": self.outcome, "fit": self.fit, "failure": self.failure,
                "probes": list(self.probes), "predicted": list(self.predicted), "switch_s": round(self.switch_s, 3),
                "probe_s": round(self.probe_s, 3), "elapsed_s": round(self.elapsed_s, 3)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LayoutDone:
    """The event of one layout's end, as `explore --json` prints it."""

    position: int
    report: LayoutReport

    def to_json(self) -> dict[str, Any]:
        return {"event": "explore_layout", "position": self.position, **self.report.to_json()}


@dataclass(frozen=True, slots=True)
class ExploreResult:
    """The sweep's end: every layout, the best by the pick rule, what was left running."""

    explore_id: int
    host: str
    service: str
    layouts: tuple[LayoutReport, ...]
    best: str | None
    left_running: str | None
    pick: Pick
    start_layout: str | None
    interrupted: bool = False
    elapsed_s: float = 0.0

    @property
    def measured(self) -> int:
        return sum(1 for r in self.layouts if r.outcome == MEASURED)

    def best_said(self) -> str:
        """The best layout and the rule that picked it, in words (the CLI's and the TUI's line)."""
        best = self.best or ("none measured" if not self.measured else "none meets the rule")
        return f"best by {self.pick.describe()}: {best}"

    def to_json(self) -> dict[str, Any]:
        """The final `{"event": "explore", ...}` line."""
        return {"event": "explore", "explore_id": self.explore_id, "host": self.host, "service": self.service,
                "layouts": [r.to_json() for r in self.layouts], "best": self.best,
                "left_running": self.left_running, "pick": str(self.pick), "start_layout": self.start_layout,
                "interrupted": self.interrupted, "elapsed_s": round(self.elapsed_s, 3)}  # fmt: skip
