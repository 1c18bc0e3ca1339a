"""The text a screen shows now, for assertions on what the operator sees."""

from __future__ import annotations

from textual.app import App


def screen_text(app: App) -> str:
    """Every row of the current screen (and the modal stack under it), as plain text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)
