"""The footer: `q Quit` and `? Help` first when the keys do not all fit, so a small terminal keeps them."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

#: The actions a footer never loses to the width of the terminal.
FIRST = ("quit", "help")


def _keys(widgets: Iterable[Widget]) -> list[Widget]:
    return [w for w in widgets if hasattr(w, "key_display") and hasattr(w, "description")]


def _too_wide(keys: list[Widget], width: int) -> bool:
    """The keys, each with its padding, need more columns than `width`."""
    return sum(len(k.key_display) + len(k.description) + 3 for k in keys) > width  # type: ignore[attr-defined]


class ConsoleFooter(Footer):
    _reordered: bool | None = None
    """Whether the last compose put `FIRST` first (a resize across the line composes again)."""

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        keys = _keys(widgets)
        self._reordered = _too_wide(keys, self.app.size.width)
        if not self._reordered:
            yield from widgets
            return
        first = [w for w in keys if getattr(w, "action", None) in FIRST]
        yield from first + [w for w in widgets if w not in first]

    def on_resize(self) -> None:
        if self._reordered is not None and _too_wide(_keys(self.children), self.app.size.width) != self._reordered:
            self.call_after_refresh(self.recompose)
