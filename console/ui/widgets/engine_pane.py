"""Engine pane: what the engine says about itself, from its `/metrics`, as gauges and sparklines.

Three rows: requests running and waiting with the KV cache gauge; generation and prompt tokens/s with
their sparklines; TTFT and ITL p50/p99 over the last minute (and preemptions, prefix-cache hits and
speculative acceptance when the engine exports them). Missing series read "n/a", never 0. The pane
polls in its own worker while its screen is shown, one scrape at a time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.widget import Widget

from console.domain.metrics import EngineFigures, EngineScrape, MetricsHistory
from console.domain.safe_text import shown
from console.hosts.endpoints import EngineMetricsReader
from console.ops.engine_status import extra_figures, latency_text
from console.ui.widgets.gpu_pane import bar, sparkline
from console.ui.widgets.polling import poll_forever
from console.ui.worker_errors import NotifiesWorkerErrors

KV_WARN, KV_CRIT = 0.80, 0.95


def scaled(values: list[float]) -> list[float]:
    """Rates as fractions of their own peak (a flat zero line when nothing ran); a NaN or infinite
    rate is left out of the peak and drawn as a gap."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return [v / top if math.isfinite(v) else math.nan for v in values] if top > 0 else [0.0 for _ in values]


def count_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def rate_text(value: float | None, exported: bool = True) -> str:
    """A rate; `-` until two scrapes give one, `n/a` when the engine does not export the counter."""
    if value is None:
        return "-" if exported else "n/a"
    return f"{value:.1f} tok/s"


class EnginePane(NotifiesWorkerErrors, Widget, can_focus=False):
    """Scrapes one service's `/metrics` every `refresh_s` and renders the figures."""

    COMPONENT_CLASSES = {
        "engine--label",
        "engine--ok",
        "engine--warn",
        "engine--crit",
        "engine--dim",
        "engine--empty",
        "engine--stale",
    }

    def __init__(
        self,
        reader: EngineMetricsReader | None,
        *,
        refresh_s: float,
        clock: Callable[[], float],
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.reader = reader
        self.refresh_s = refresh_s
        self.clock = clock
        self.history = MetricsHistory()
        self.figures: EngineFigures | None = None
        self.error: str | None = None if reader else "no HTTP endpoint to read /metrics from"
        self.border_title = "engine"

    def on_mount(self) -> None:
        if self.reader is not None:
            self.poll()
        self.refresh_stale()

    @work(exclusive=True, group="engine-poll", exit_on_error=False)
    async def poll(self) -> None:
        assert self.reader is not None
        await poll_forever(
            self.reader.scrape, show=self.ingest, fail=self._failed, idle_s=self.refresh_s,
            wanted=lambda: self.screen.is_current, wait=lambda: asyncio.sleep(self.refresh_s),
            timeout_s=max(5.0, 3 * self.refresh_s),
        )  # fmt: skip

    def ingest(self, scrape: EngineScrape) -> None:
        """Take one scrape (also how tests feed fixed data)."""
        self.history.add(scrape)
        self.error = None
        self.figures = self.history.figures(self.clock())
        self.refresh_stale()

    def _failed(self, reason: str) -> None:
        self.error = shown(reason)  # host text: made inert
        self.refresh_stale()

    def data_age_s(self) -> float | None:
        return None if self.figures is None else max(0.0, self.clock() - self.history.scrapes[-1].taken_at)

    def is_stale(self) -> bool:
        """Figures shown are old: the last scrape failed, or none came for three intervals."""
        age = self.data_age_s()
        return age is not None and (self.error is not None or age > max(3 * self.refresh_s, 5.0))

    def refresh_stale(self) -> None:
        age = self.data_age_s()
        stale = self.is_stale()
        self.set_class(stale, "-stale")
        title = f"engine · {self.history.scrapes[-1].engine}" if self.history.scrapes else "engine"
        if stale:
            title += f" · STALE, data {age:.0f}s old"
        self.border_title = title
        # Host text as a Text, never markup: `[/]` in an error must not end the poll that reported it.
        note = self.error or "; ".join(shown(n) for n in self.figures.notes) if self.figures is not None else ""
        self.border_subtitle = Text(note)
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        return 3 if self.figures is not None else 1

    def render(self) -> Text:
        f = self.figures
        if f is None:
            return Text(f"engine metrics: {self.error or 'waiting for the first scrape…'}",
                        style=self.get_component_rich_style("engine--stale"))
        stale = self.is_stale()

        def style(name: str):
            # Old figures in the live colours read as live: stale ones are all drawn in the stale colour.
            keep = name in ("engine--label", "engine--empty")
            return self.get_component_rich_style(name if keep or not stale else "engine--stale")

        spark_w = max(6, min(24, self.content_region.width // 6))
        out = Text(no_wrap=True, overflow="crop", style=style("engine--stale") if stale else "")
        label, ok = style("engine--label"), style("engine--ok")
        last = self.history.scrapes[-1]
        # Row 1: requests, and the KV cache as a gauge with its history.
        out.append("requests  ", style=label)
        out.append(f"{count_text(f.running_requests):>4} running", style=ok)
        waiting = f.waiting_requests
        out.append(f"  {count_text(waiting):>4} waiting", style=style("engine--warn" if waiting else "engine--dim"))
        out.append("    KV cache ", style=label)
        if f.kv_cache_usage is None:
            out.append("n/a", style=style("engine--dim"))
        else:
            level = "engine--crit" if f.kv_cache_usage >= KV_CRIT else (
                "engine--warn" if f.kv_cache_usage >= KV_WARN else "engine--ok")
            filled, empty = bar(f.kv_cache_usage, 24)
            out.append(filled, style=style(level))
            out.append(empty, style=style("engine--empty"))
            out.append(f" {100 * f.kv_cache_usage:5.1f}%  ")
            out.append(sparkline(self.history.series("kv_cache_usage", spark_w), spark_w), style=style(level))
        # Row 2: token rates and their sparklines (each scaled to its own peak).
        out.append("\ntokens/s  ", style=label)
        out.append("gen ", style=label)
        out.append(f"{rate_text(f.generation_tokens_per_s, last.generation_tokens_total is not None):>14} ")
        out.append(sparkline(scaled(self.history.series("generation_tokens_total", spark_w)), spark_w), style=ok)
        out.append("    prompt ", style=label)
        out.append(f"{rate_text(f.prompt_tokens_per_s, last.prompt_tokens_total is not None):>14} ")
        out.append(sparkline(scaled(self.history.series("prompt_tokens_total", spark_w)), spark_w), style=ok)
        # Row 3: the last minute's latencies, then what only some engines export.
        out.append("\nlatency   ", style=label)
        out.append(f"TTFT p50 {latency_text(f.ttft_p50_s)} p99 {latency_text(f.ttft_p99_s)}")
        out.append(" · ", style=label)
        out.append(f"ITL p50 {latency_text(f.itl_p50_s)} p99 {latency_text(f.itl_p99_s)}")
        extras = extra_figures(f)
        if extras:
            out.append("    " + " · ".join(extras), style=style("engine--dim"))
        return out
