"""A stalled service in the TUI (docs/stalls.md): the service pane says STALLED with since when, the reason
and the ranks; the fleet row says STALLED before the health. The engine's counters stay frozen with three
requests running while readings 30 s apart arrive (the fixed host's /metrics, as vllm#41725 saw it)."""

from __future__ import annotations

import dataclasses

from fixed_host import T0, fixed_app
from pilot_wait import settle
from screen_text import pane_rows, screen_text

from console.ops.views import ServingCache, host_summary
from console.ui.screens.host import HostScreen
from console.ui.widgets.service_pane import ServicePane


class FrozenCounters:
    """Each scrape 30 s after the last, every counter as it was: work pending, nothing moving."""

    def __init__(self, inner) -> None:
        self.inner, self.n = inner, 0

    async def scrape(self):
        first = await self.inner.scrape()
        self.n += 1
        return dataclasses.replace(first, taken_at=T0 + 30.0 * self.n)


async def test_the_service_pane_says_stalled_since_when_why_and_which_ranks() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(140, 44)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
        probe = app.screen.host.probes["kimi-k2.6"]
        probe.metrics_reader = FrozenCounters(probe.metrics_reader)
        pane = app.screen.query_one(ServicePane)
        for _ in range(3):
            pane.poll_now()
            await settle(pilot, lambda: False, tries=3)
            if any("STALLED" in row for row in pane_rows(app)):
                break
        assert await settle(pilot, lambda: any("serving STALLED since" in row for row in pane_rows(app)), tries=40)
        rows = "\n".join(pane_rows(app))
        assert "no progress for" in rows and "pending 3 running, 0 waiting" in rows
        assert "ranks" in rows and "all ranks look alike" in rows


async def test_the_fleet_row_says_stalled() -> None:
    app = fixed_app({"demo": "ep8", "gpu-node-2": "failed"})
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.screen.query_one("#fleet-table")
        assert await settle(pilot, lambda: len(table.summaries) == 2)
        host = app.hosts["demo"]
        probe = host.probes["kimi-k2.6"]
        probe.metrics_reader = FrozenCounters(probe.metrics_reader)
        cache = ServingCache()
        summary = None
        for _ in range(3):
            summary = await host_summary(host, app.clock, serving=cache)
        assert summary is not None and summary.stalled == ("kimi-k2.6",)
        table.show(summary)
        assert await settle(pilot, lambda: "STALLED kimi-k2.6" in screen_text(app))
