"""Calibration: a host's measured layouts move a few coefficients, and the range narrows.

Each observation is a layout's terms with one measured metric. The fit searches multipliers of
`bw_eff`, `comm_scale` and the fixed per-step costs on a log grid, minimising the squared log error
of the observations plus a pull towards the uncalibrated coefficients (a prior, so that one or two
measurements cannot drag a coefficient they say little about). Moving `comm_scale` is what lets a
host's TP8 figure say how slow its links are, and so move EP and PP differently from TP.

The range narrows only for the kinds of layout measured (`layout_kind`: which of TP, EP, PP, DP it
uses): a host's TP figures say little of how its EP dispatch or its pipeline bubbles behave.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product

from console.domain.layout import Layout
from console.domain.perf.speed import LayoutTerms
from console.domain.perf.step import Coefficients

METRICS = ("per_request_tok_s", "output_tok_s", "tpot_ms", "ttft_ms")
#: +/- share of the range before calibration: the tuning set's 80th percentile |TPOT error|.
ZERO_SHOT_BAND = 0.45
#: The narrowest range after calibration.
MIN_BAND = 0.08
PRIOR_WEIGHT = 0.05
_BW = tuple(2 ** (i / 4) for i in range(-4, 5))  # 0.5x .. 2x
_COMM = tuple(2 ** (i / 2) for i in range(-6, 7))  # 0.125x .. 8x
_FIXED = tuple(2 ** (i / 2) for i in range(-4, 5))  # 0.25x .. 4x


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
    parts = [name for name, size in (("tp", layout.tp), ("ep", layout.ep), ("pp", layout.pp), ("dp", layout.dp))
             if size > 1]
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


def calibrate(base: Coefficients, observations: list[Observation]) -> Calibration:
    """Fit `base`'s coefficients to `observations`; none leaves `base` and the zero-shot range."""
    usable = [o for o in observations if o.value > 0 and math.isfinite(o.value)]
    if not usable:
        return Calibration(base, ZERO_SHOT_BAND, 0)
    best: tuple[float, Coefficients, float] | None = None
    for bw, cs, fx in product(_BW, _COMM, _FIXED):
        k = replace(
            base,
            bw_eff=min(0.98, base.bw_eff * bw),
            comm_scale=base.comm_scale * cs,
            layer_us=base.layer_us * fx,
            step_us=base.step_us * fx,
        )
        errors = [math.log(metric_value(o.terms, o.metric, k) / o.value) for o in usable]
        sse = sum(e * e for e in errors)
        prior = PRIOR_WEIGHT * (math.log(bw) ** 2 + math.log(cs) ** 2 + math.log(fx) ** 2)
        if best is None or sse + prior < best[0]:
            best = (sse + prior, k, max(abs(e) for e in errors))
    assert best is not None
    _, k, worst = best
    # Two measurements leave about half the zero-shot doubt; more shrink it towards the fit's residual.
    band = max(MIN_BAND, worst * 1.5, ZERO_SHOT_BAND / (1 + len(usable) / 2))
    kinds = frozenset(o.kind for o in usable if o.kind)
    return Calibration(k, min(band, ZERO_SHOT_BAND), len(usable), kinds)
