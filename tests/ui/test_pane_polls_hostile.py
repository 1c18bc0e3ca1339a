"""The engine pane under a hostile engine: a NaN gauge is drawn, and an error text with markup marks the
pane stale without ending its poll (issue 18, B5 and B7)."""

from __future__ import annotations

import dataclasses
import math

from engine_pane_app import T0, PaneApp, ScriptedReader, text
from pilot_wait import settle

from console.hosts.endpoints import MetricsUnavailable
from console.ui.widgets.engine_pane import EnginePane

MARKUP_ERROR = "bad answer [/] [@click=app.quit]x[/] \x1b]2;owned\x07"


class NanReader(ScriptedReader):
    """The documented SGLang dump with a NaN KV cache gauge and an infinite token counter, as a
    recorded host may hand them over without the parser."""

    async def scrape(self):
        scrape = await super().scrape()
        return dataclasses.replace(scrape, kv_cache_usage=math.nan,
                                   generation_tokens_total=math.inf if self.calls % 2 else scrape.generation_tokens_total)


async def test_a_nan_gauge_and_an_infinite_counter_are_drawn_not_fatal() -> None:
    app = PaneApp(NanReader([T0]))
    async with app.run_test(size=(120, 10)) as pilot:
        assert await settle(pilot, lambda: app.reader.calls >= 4)
        await pilot.pause()
        assert "KV cache" in text(app) and "running" in text(app)
        assert app.query_one(EnginePane).figures is not None


class FlakyReader(ScriptedReader):
    """Good scrapes, except calls 3 and 4, which fail with markup and escape sequences in their text."""

    def __init__(self, now: list[float]) -> None:
        super().__init__(now)
        self.attempts = 0

    async def scrape(self):
        self.attempts += 1
        if self.attempts in (3, 4):
            raise MetricsUnavailable(MARKUP_ERROR)
        return await super().scrape()


async def test_markup_in_an_error_never_ends_the_poll() -> None:
    app = PaneApp(FlakyReader([T0]))
    async with app.run_test(size=(120, 10)) as pilot:
        pane = app.query_one(EnginePane)
        assert await settle(pilot, lambda: pane.error is not None)
        subtitle = pane.border_subtitle or ""
        assert await settle(pilot, lambda: app.reader.attempts >= 6)  # the poll went on
        assert await settle(pilot, lambda: pane.error is None)
        assert "[/]" in subtitle and "@click" in subtitle  # shown as text, never run as an action
        assert "\x1b" not in subtitle and "\\x1b]2;owned\\x07" in subtitle
        assert app.is_running and not app.query_one(EnginePane).has_class("-stale")
