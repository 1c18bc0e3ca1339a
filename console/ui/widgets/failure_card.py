"""The triage card of a failed switch: what died, where, with which figures, and what fits instead."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from console.ops.events import SwitchResult
from console.ops.failure_rows import failure_kind, failure_rows

_TONES = {"bad": "card--bad", "ok": "card--ok", "": "card--value"}


class FailureCard(Static):
    """Built from the typed result of a switch, through the one renderer the CLI uses too."""

    COMPONENT_CLASSES = {"card--label", "card--value", "card--bad", "card--ok"}

    def show_failure(self, result: SwitchResult, fits_instead: Sequence[str]) -> None:
        """Fill the card from a failed result and the layouts predicted to fit."""
        self.result = result
        self.fits_instead = list(fits_instead)
        self.border_title = f"FAILED · {failure_kind(result)}"
        self.remove_class("-hidden")
        self.update(self._text(result))

    def _text(self, result: SwitchResult) -> Text:
        s = self.get_component_rich_style
        out = Text()
        for row in failure_rows(result, self.fits_instead):
            if row.label:
                out.append(f"{row.label:<10}", style=s("card--label"))
                out.append(row.value + "\n", style=s(_TONES[row.tone]))
            else:
                out.append(row.value, style=s("card--label"))
        out.rstrip()
        return out
