"""The footer: `q Quit` and `? Help` first when the keys do not all fit, so a small terminal keeps them."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer

#: The actions a footer never loses to the width of the terminal.
FIRST = ("quit", "help")


class ConsoleFooter(Footer):
    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        keys = [w for w in widgets if hasattr(w, "key_display") and hasattr(w, "description")]
        needed = sum(len(k.key_display) + len(k.description) + 3 for k in keys)
        if needed <= self.app.size.width:
            yield from widgets
            return
        first = [w for w in keys if getattr(w, "action", None) in FIRST]
        yield from first + [w for w in widgets if w not in first]
