"""Explore by prediction: the order of the layouts, which to prune, and each measured layout's receipt.

The layouts are measured fastest-predicted first (by the pick rule's figure: aggregate tok/s at the top
concurrency, or tok/s per user at the lowest for `c1`). Before each one the model is calibrated again on
the host's history, this explore's measurements included; a layout whose optimistic bound (the top of its
predicted range) cannot beat the best figure measured so far is pruned, never started. `ttft-slo` picks
are never pruned (the model does not bound p99 TTFT).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.config import ServiceConfig
from console.ops.explore.results_store import PerfReceipt, ResultsStore
from console.ops.explore.results_table import C1, TTFT_SLO, Pick
from console.ops.speed_check import SpeedContext, history_calibration, predict_layout

if TYPE_CHECKING:
    from console.domain.perf import Calibration, SpeedPrediction
    from console.ops.explore.report import ExploreOptions


@dataclass(frozen=True, slots=True)
class Forecast:
    """A layout's predictions at the explore's levels, and its figure under the pick rule."""

    layout: str
    predictions: tuple[SpeedPrediction, ...]
    figure: float
    optimistic: float

    def to_json(self) -> tuple[dict[str, Any], ...]:
        return tuple(p.to_json() for p in self.predictions)


class Forecaster:
    """Predictions for one explore of one service on one host."""

    def __init__(
        self, ctx: SpeedContext, service: ServiceConfig, host: str, store: ResultsStore, opts: ExploreOptions
    ) -> None:
        self.ctx, self.service, self.host, self.store, self.opts = ctx, service, host, store, opts
        self.levels = sorted({c for c, _rate in opts.probe.levels() if c})

    def forecast(self, name: str, calibration: Calibration | None = None) -> Forecast | None:
        """The layout's forecast under `calibration`, by default the one the history gives now."""
        lc = self.service.layout(name)
        if lc is None or not self.levels:
            return None
        calibration = calibration or history_calibration(self.ctx, self.service, self.host, self.store)
        preds = tuple(predict_layout(self.ctx, lc, c, calibration, input_len=self.opts.probe.input_len,
                                     output_len=self.opts.probe.output_len) for c in self.levels)  # fmt: skip
        if self.opts.pick.rule == C1:
            band = preds[0].high_tok_s / preds[0].output_tok_s - 1
            figure, top = preds[0].per_request_tok_s, preds[0].per_request_tok_s * (1 + band)
        else:
            figure, top = preds[-1].output_tok_s, preds[-1].high_tok_s
        return Forecast(name, preds, figure, top)

    def order(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Fastest predicted first; layouts that cannot be predicted keep their place at the end."""
        calibration = history_calibration(self.ctx, self.service, self.host, self.store)
        figures = {n: f.figure for n in names if (f := self.forecast(n, calibration)) is not None}
        return tuple(sorted(names, key=lambda n: -figures.get(n, -1.0)))

    def pruned_by(self, forecast: Forecast | None, best: float | None, pick: Pick) -> str | None:
        """Why this layout need not run (its bound is below the best measured), or None."""
        if forecast is None or best is None or pick.rule == TTFT_SLO:
            return None
        if forecast.optimistic < best:
            return (f"pruned: predicted at most {forecast.optimistic:,.1f} tok/s, below the "
                    f"{best:,.1f} measured")  # fmt: skip
        return None

    def receipts(self, forecast: Forecast, probes: tuple[dict[str, Any], ...], explore_id: int) -> None:
        """Store prediction against measurement for each level measured."""
        by_c = {p.concurrency: p for p in forecast.predictions}
        for line in probes:
            pred = by_c.get(line.get("concurrency"))  # type: ignore[arg-type]
            if pred is None or line.get("outcome") != "measured":
                continue
            measured = {"tpot_ms": line.get("mean_tpot_ms"), "output_tok_s": line.get("output_throughput"),
                        "per_request_tok_s": line.get("per_user_tokens_per_s"),
                        "ttft_ms": line.get("median_ttft_ms")}  # fmt: skip
            self.store.add_receipt(PerfReceipt(
                time.time(), self.host, self.service.name, forecast.layout, pred.concurrency, pred.to_json(),
                measured, _error(pred.tpot_ms, measured["tpot_ms"]), _error(pred.output_tok_s, measured["output_tok_s"]),
                self.ctx.fingerprint, explore_id))  # fmt: skip


def _error(predicted: float, measured: Any) -> float | None:
    if not isinstance(measured, int | float) or measured <= 0:
        return None
    return round(predicted / measured - 1, 4)
