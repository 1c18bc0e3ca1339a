"""The triage card of a failed switch: what died, where, with which figures, and what fits instead."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.domain.safe_text import shown
from console.ops.switch import SwitchResult, failure_kind, failure_rows, headline

_TONES = {"bad": "card--bad", "ok": "card--ok", "": "card--value"}
#: Rows a CUDA OOM's headline already says (`CUDA OOM · GPU 2 · tried 672 MiB · 225 MiB free of 94.97 GiB`).
_IN_OOM_HEADLINE = {"cause", "GPU", "tried", "free", "total"}
#: Characters of the journal line itself the card keeps (the journal pane has all of it).
LOG_CHARS = 120


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

    def _text(self, result: SwitchResult) -> Group:
        """The headline, then a grid of label and value (a long value wraps under itself, not the labels)."""
        s = self.get_component_rich_style
        oom = result.failure is not None and result.failure.oom is not None
        grid = Table.grid(padding=(0, 1), expand=True)
        grid.add_column(style=s("card--label"), no_wrap=True, width=9)
        grid.add_column(ratio=1, overflow="fold")
        # Every value may quote the host's journal: shown through redaction and the sanitiser.
        parts: list[Text | Table] = [Text(shown(headline(result)), style=s("card--bad"))]
        back = result.rollback
        if back is not None and back.outcome != "ready":  # the way back failed too: its own line, up top
            cause = back.failure.summary if back.failure is not None else back.reason or back.outcome
            grid.add_row("rollback", Text(shown(f"{back.layout} {back.outcome.upper()}: {cause}"),
                                          style=s("card--bad")))
        for row in failure_rows(result, self.fits_instead, pick="press l"):  # l: the layout picker
            if oom and row.label in _IN_OOM_HEADLINE:
                continue
            if row.label:
                grid.add_row(row.label, Text(shown(row.value), style=s(_TONES[row.tone])))
            else:  # the journal line itself, unlabelled and cut to a few lines
                value = shown(row.value)
                line = value if len(value) <= LOG_CHARS else value[: LOG_CHARS - 1] + "…"
                parts += [grid, Text(line, style=s("card--label"))]
                grid = Table.grid()
        if grid.row_count:
            parts.append(grid)
        return Group(*parts)
