"""Calibration: a host's measured layouts move a few coefficients, and the range narrows.

Each observation is a layout's terms with one measured metric. The fit searches multipliers of
`bw_eff`, `comm_scale`, `a2a_scale` and the fixed per-step costs on log grids (coordinate descent),
minimising the squared log error
of the observations plus a pull towards the uncalibrated coefficients (a prior, so that one or two
measurements cannot drag a coefficient they say little about). Moving `comm_scale` is what lets a
host's TP8 figure say how slow its all-reduces are, and so move EP and PP differently from TP;
`a2a_scale` moves EP's dispatch and combine once an EP layout is measured.

The range narrows only for the kinds of layout measured (`layout_kind`: which of TP, EP, PP, DP it
uses): a host's TP figures say little of how its EP dispatch or its pipeline bubbles behave.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from console.domain.layout import Layout
from console.domain.perf.speed import LayoutTerms
from console.domain.perf.step import Coefficients

METRICS = ("per_request_tok_s", "output_tok_s", "tpot_ms", "ttft_ms")
#: +/- share of the range before calibration: about the tuning part's 80th-90th percentile zero-shot
#: abs TPOT error (39.7%, 43.8%; the median is 13.3%).
ZERO_SHOT_BAND = 0.45
#: The narrowest range after calibration: the tuning part's 80th percentile |TPOT error| after
#: calibrating on two layouts of the same group (26.5%; the median is 8.7%, the 90th 37%).
MIN_BAND = 0.27
PRIOR_WEIGHT = 0.05
#: Multipliers searched for each coefficient (log-spaced), and the coordinate-descent rounds.
_GRIDS = {
    "bw_eff": tuple(2 ** (i / 4) for i in range(-4, 5)),  # 0.5x .. 2x
    "comm_scale": tuple(2 ** (i / 4) for i in range(-12, 13)),  # 0.125x .. 8x
    "a2a_scale": tuple(2 ** (i / 4) for i in range(-12, 13)),
    "fixed": tuple(2 ** (i / 4) for i in range(-8, 9)),  # layer_us and step_us together, 0.25x .. 4x
}
_MOVES = 12


@dataclass(frozen=True, slots=True)
class Observation:
    """One measured metric of one layout (`metric` one of METRICS)."""

    terms: LayoutTerms
    metric: str
    value: float
    kind: str = ""
    """The layout's kind (`layout_kind`), for the range of layouts of the same kind."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """Coefficients fitted to a host's observations, and the range they leave."""

    coefficients: Coefficients
    band: float
    observations: int
    kinds: frozenset[str] = frozenset()

    @property
    def calibrated(self) -> bool:
        return self.observations > 0

    def band_for(self, kind: str) -> float:
        """The range for a layout of `kind`: narrowed where that kind was measured, else zero-shot."""
        return self.band if kind in self.kinds or not self.kinds else max(self.band, ZERO_SHOT_BAND)


def layout_kind(layout: Layout) -> str:
    """Which parallelisms a layout uses: `tp`, `tp+ep`, `pp`, `tp+pp`, `tp+ep+dp`, ..."""
    parts = [
        name
        for name, size in (("tp", layout.tp), ("ep", layout.ep), ("pp", layout.pp), ("dp", layout.dp))
        if size > 1
    ]
    return "+".join(parts) or "single"


def metric_value(terms: LayoutTerms, metric: str, k: Coefficients) -> float:
    """A metric predicted from a layout's terms (the units METRICS name)."""
    tpot = terms.tpot_s(k)
    if metric == "tpot_ms":
        return tpot * 1e3
    if metric == "per_request_tok_s":
        return 1.0 / tpot
    ttft = terms.ttft_s(k)
    if metric == "ttft_ms":
        return ttft * 1e3
    if metric == "output_tok_s":
        out = max(1, terms.output_len)
        return terms.concurrency * out / (ttft + out * tpot)
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")


def _apply(base: Coefficients, m: dict[str, float]) -> Coefficients:
    return replace(
        base,
        bw_eff=min(0.98, base.bw_eff * m["bw_eff"]),
        comm_scale=base.comm_scale * m["comm_scale"],
        a2a_scale=base.a2a_scale * m["a2a_scale"],
        layer_us=base.layer_us * m["fixed"],
        step_us=base.step_us * m["fixed"],
    )


def _loss(base: Coefficients, m: dict[str, float], usable: list[Observation]) -> tuple[float, float]:
    k = _apply(base, m)
    errors = [math.log(metric_value(o.terms, o.metric, k) / o.value) for o in usable]
    prior = PRIOR_WEIGHT * sum(math.log(v) ** 2 for v in m.values())
    return sum(e * e for e in errors) + prior, max(abs(e) for e in errors)


def calibrate(base: Coefficients, observations: list[Observation]) -> Calibration:
    """Fit `base`'s coefficients to `observations`; none leaves `base` and the zero-shot range.

    Greedy coordinate descent: each move sets the one multiplier whose best grid value lowers the
    loss most, so a single TP figure moves the coefficient that explains it best (on a PCIe host, the
    all-reduce latency), not whichever comes first.
    """
    usable = [o for o in observations if o.value > 0 and math.isfinite(o.value)]
    if not usable:
        return Calibration(base, ZERO_SHOT_BAND, 0)
    m = dict.fromkeys(_GRIDS, 1.0)
    best, worst = _loss(base, m, usable)
    for _ in range(_MOVES):
        move = None
        for name, grid in _GRIDS.items():
            for value in grid:
                trial = {**m, name: value}
                loss, trial_worst = _loss(base, trial, usable)
                if loss < best - 1e-12:
                    best, worst, move = loss, trial_worst, trial
        if move is None:
            break
        m = move
    k = _apply(base, m)
    # Two measurements leave about half the zero-shot doubt; more shrink it towards the fit's residual.
    band = max(MIN_BAND, worst * 1.5, ZERO_SHOT_BAND / (1 + len(usable) / 2))
    kinds = frozenset(o.kind for o in usable if o.kind)
    return Calibration(k, min(band, ZERO_SHOT_BAND), len(usable), kinds)
