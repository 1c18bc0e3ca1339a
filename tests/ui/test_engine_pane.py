"""The engine pane: the engine's own numbers as gauges and sparklines, its reasons when there are none."""

from __future__ import annotations

from pathlib import Path

from engine_pane_app import SAMPLE, T0, PaneApp, ScriptedReader, text
from pilot_wait import settle

from console.domain.metrics.exposition import parse_metrics
from console.ui.widgets.engine_pane import EnginePane


async def test_gauges_and_rates_from_the_engines_own_numbers() -> None:
    app = PaneApp(ScriptedReader([T0]))
    async with app.run_test(size=(120, 10)) as pilot:
        assert await settle(pilot, lambda: app.reader.calls >= 3)
        shown = text(app)
        assert " 162 running" in shown and "2826 waiting" in shown and " 28.0% " in shown
        assert "1000.0 tok/s" in shown  # the counter's rate, not its total
        # SGLang's dump puts most TTFTs above 30 s, but none is new within this minute: no quantile.
        assert "TTFT p50 - p99 -" in shown and "prefix hits 0.8%" in shown
        assert app.query_one(EnginePane).border_title == "engine · sglang"


async def test_a_missing_endpoint_says_why_in_one_line() -> None:
    hint = "/metrics answered 404: start SGLang with --enable-metrics"
    app = PaneApp(ScriptedReader([T0], fail=hint))
    async with app.run_test(size=(120, 10)) as pilot:
        assert await settle(pilot, lambda: hint in text(app))
        assert text(app) == f"engine metrics: {hint}"


async def test_a_service_without_an_http_probe_is_not_polled() -> None:
    app = PaneApp(None)
    async with app.run_test(size=(120, 10)):
        assert text(app) == "engine metrics: no HTTP endpoint to read /metrics from"


async def test_missing_series_read_na_and_a_first_scrape_has_no_rate_yet() -> None:
    excerpt = SAMPLE.parent / "vllm_0.10_glm45_cache_excerpt.prom"

    class OneDump:
        now = [T0]

        async def scrape(self):
            return parse_metrics(excerpt.read_text(), T0)

    app = PaneApp(OneDump())
    async with app.run_test(size=(120, 10)) as pilot:
        assert await settle(pilot, lambda: app.query_one(EnginePane).figures is not None)
        shown = text(app)
        assert " n/a running   n/a waiting" in shown  # this vLLM dump has no request gauges: not 0
        assert "   0.0% " in shown and "n/a" in shown.split("gen", 1)[1].split("prompt")[0]
        assert app.query_one(EnginePane).border_title == "engine · vllm"


async def test_stale_figures_are_drawn_in_the_stale_colour_not_the_live_ones() -> None:
    """Issue 30, B7: figures 132 s old were drawn green like live ones; only the title said STALE."""

    class StyledApp(PaneApp):  # the console's own colours, so that each class has its own
        CSS_PATH = str(Path(__file__).resolve().parents[2] / "console" / "ui" / "console.tcss")

    app = StyledApp(ScriptedReader([T0]))
    async with app.run_test(size=(120, 10)) as pilot:
        assert await settle(pilot, lambda: app.reader.calls >= 2)
        pane = app.query_one(EnginePane)
        live = pane.get_component_rich_style("engine--ok")
        assert any(span.style == live for span in pane.render().spans)
        app.reader.fail = "engine not reachable (connection refused)"
        app.now[0] += 132
        assert await settle(pilot, lambda: pane.has_class("-stale") and "STALE" in str(pane.border_title))
        drawn = pane.render()
        stale = pane.get_component_rich_style("engine--stale")
        colours = {"engine--ok", "engine--warn", "engine--crit", "engine--dim"}
        assert not [(c, span) for span in drawn.spans for c in colours
                    if span.style == pane.get_component_rich_style(c)], (stale, drawn.spans)  # fmt: skip
        assert drawn.style == stale and any(span.style == stale for span in drawn.spans)
