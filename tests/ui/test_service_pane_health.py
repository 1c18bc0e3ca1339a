"""The service pane: the last ready layout in full on its own row; health probed at once when the
journal says READY; a health reading older than the phase shows its age."""

from __future__ import annotations

import dataclasses

import pytest
from fixed_host import T0, fixed_app
from pilot_wait import settle
from screen_text import LastReadyAudit, pane_rows, screen_text

from console.domain.values import HealthSample, Phase
from console.ui.screens.host import HostScreen
from console.ui.widgets.service_pane import ServicePane


@pytest.mark.parametrize("size", [(120, 40), (140, 45)])
async def test_fit_detail_and_last_ready_show_in_full(host_screen_ready, size: tuple[int, int]) -> None:
    now = [T0]
    app = fixed_app({"demo": "ep8"}, audit=LastReadyAudit(), clock=lambda: now[0])
    async with app.run_test(size=size) as pilot:
        await host_screen_ready(pilot)
        assert await settle(pilot, lambda: any("last ready EP8" in row for row in pane_rows(app)))
        rows = pane_rows(app)
        assert any("72.1 GiB/GPU, headroom +3.6 GiB " in row for row in rows)
        assert any("health  ready (HTTP 200)" in row for row in rows)
        assert any("phase   READY" in row for row in rows)
        assert not any("…" in row for row in rows)
        pane = app.screen.query_one(ServicePane)
        now[0] = T0 + 3600 * 2  # an old reading with its age still fits
        pane.show(dataclasses.replace(pane.view, health=HealthSample(T0, "starting", http_status=503)))
        assert await settle(pilot, lambda: any("health  starting (HTTP 503, 2h00m ago)" in row for row in pane_rows(app)))
        assert not any("…" in row for row in pane_rows(app))


async def test_ready_phase_probes_health_at_once(host_screen_ready) -> None:
    app = fixed_app({"demo": "ep8"})  # polls once an hour: only the READY phase can bring a new probe
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        screen = app.screen
        pane = screen.query_one(ServicePane)
        probe = screen.host.probes["kimi-k2.6"]
        probe.sample = HealthSample(T0, "starting", http_status=503)
        pane.set_phase(Phase.LOADING_WEIGHTS)
        pane.poll_now()
        assert await settle(pilot, lambda: "starting (HTTP 503)" in screen_text(app))
        probe.sample = HealthSample(T0, "ready", http_status=200)
        pane.set_phase(Phase.READY)
        assert await settle(pilot, lambda: "ready (HTTP 200)" in screen_text(app), tries=20)


async def test_health_older_than_the_phase_shows_its_age(host_screen_ready) -> None:
    now = [T0]
    app = fixed_app({"demo": "ep8"}, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        screen = app.screen
        pane = screen.query_one(ServicePane)
        screen.host.probes["kimi-k2.6"].sample = HealthSample(T0, "starting", http_status=503)
        pane.poll_now()
        assert await settle(pilot, lambda: "starting (HTTP 503)" in screen_text(app))
        now[0] = T0 + 12  # the journal moves on; the probe (fixed here) still has the old reading
        pane.set_phase(Phase.LOADING_WEIGHTS)
        pane.set_phase(Phase.READY)
        assert await settle(pilot, lambda: "starting (HTTP 503, 12s ago)" in screen_text(app))
        assert "phase   READY" in screen_text(app)


async def test_a_down_reading_says_why_and_when() -> None:
    """Issue 30, B7: `health down (3s ago)` never said the probe had timed out."""
    now = [T0]
    app = fixed_app({"demo": "ep8"}, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
        pane = app.screen.query_one(ServicePane)
        now[0] = T0 + 3 * 3600  # the app polls once an hour: a reading older than that shows its age
        pane.show(dataclasses.replace(pane.view, health=HealthSample(T0, "down", error="timed out after 3 s")))
        assert await settle(pilot, lambda: any("health  down (timed out after 3 s, 3h00m ago)" in row
                                               for row in pane_rows(app))), "\n".join(pane_rows(app))  # fmt: skip
        refused = "connection refused (Cannot connect to host 127.0.0.1:30000 ssl:default [Connect call failed])"
        pane.show(dataclasses.replace(pane.view, health=HealthSample(now[0], "down", error=refused)))
        assert await settle(pilot, lambda: any("health  down (connection refused)" in row for row in pane_rows(app)))
