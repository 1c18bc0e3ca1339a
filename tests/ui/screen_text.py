"""The text a screen shows now, for assertions on what the operator sees."""

from __future__ import annotations

from textual.app import App

from console.ui.widgets.service_pane import ServicePane


def screen_text(app: App) -> str:
    """Every row of the current screen (and the modal stack under it), as plain text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)


def pane_rows(app) -> list[str]:
    """The service pane's rows as shown (the text between its borders)."""
    pane = app.screen.query_one(ServicePane)
    region = pane.region
    rows = screen_text(app).splitlines()[region.y : region.y + region.height]
    return [row[region.x : region.x + region.width] for row in rows]


class LastReadyAudit:
    """The audit log's answers the service pane asks for."""

    def last_ready_layout(self, host: str, service: str) -> str | None:
        return "EP8"

    def last_started_layout(self, host: str, service: str) -> str | None:
        return None


def notified(app) -> list:
    """Every notification `app` raised in this test, oldest first (tests/ui/conftest.py keeps them)."""
    return list(getattr(app._notifications, "seen", []))
