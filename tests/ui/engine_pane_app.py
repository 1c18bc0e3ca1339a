"""A one-widget app around the engine pane and a scripted metrics reader, for the engine pane's tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.app import App, ComposeResult

from console.domain.metrics.exposition import parse_metrics
from console.hosts.endpoints.metrics import MetricsUnavailable
from console.ui.widgets.engine_pane import EnginePane

T0 = 1_800_000_000.0


class PaneApp(App):
    def __init__(self, reader) -> None:
        super().__init__()
        self.reader, self.now = reader, reader.now if reader else [T0]

    def compose(self) -> ComposeResult:
        yield EnginePane(self.reader, refresh_s=0.05, clock=lambda: self.now[0])


class ScriptedReader:
    """A reader whose scrapes are the documented SGLang dump, 1000 more tokens each second."""

    def __init__(self, now: list[float], fail: str | None = None) -> None:
        self.now, self.fail, self.calls = now, fail, 0
        self.base = parse_metrics(SAMPLE.read_text(), T0)

    async def scrape(self):
        if self.fail:
            raise MetricsUnavailable(self.fail)
        self.calls += 1
        self.now[0] = T0 + self.calls
        return dataclasses.replace(
            self.base,
            taken_at=self.now[0],
            generation_tokens_total=self.base.generation_tokens_total + 1000 * self.calls,
        )


def text(app: PaneApp) -> str:
    return app.query_one(EnginePane).render().plain


SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "sglang_docs_llama31_8b.prom"
