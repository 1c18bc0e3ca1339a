"""Health belongs to the unit: when the service's unit has failed and another program answers 200 on its
port, the pane says so and names it; it never shows a green `ready` under the red FAILED banner."""

from __future__ import annotations

from fixed_host import T0, fixed_app
from pilot_wait import settle
from screen_text import pane_rows

from console.domain.values import HealthSample, Phase
from console.ui.widgets.service_pane import ServicePane

HOLDER = "pid 4242 (python3 -m http.server 30000)"


async def test_a_200_from_another_program_under_a_failed_unit_is_named_and_the_phase_is_failed(host_screen_ready) -> None:
    app = fixed_app({"demo": "failed"})
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        screen = app.screen

        async def holder(port: int) -> str | None:
            return HOLDER if port == 30000 else None

        screen.host.port_holder = holder
        screen.host.probes["kimi-k2.6"].sample = HealthSample(T0, "ready", http_status=200)
        pane = screen.query_one(ServicePane)
        pane.set_phase(Phase.READY)  # the journal's last word was READY, before the unit died
        pane.poll_now()
        assert await settle(pilot, lambda: any("foreign (HTTP 200)" in row for row in pane_rows(app)), tries=40)
        rows = pane_rows(app)
        assert any(" FAILED " in row for row in rows)
        assert any("answered by pid 4242 (python3 -m http" in row for row in rows)
        assert any("phase   FAILED" in row for row in rows)
        assert not any("ready" in row for row in rows)
