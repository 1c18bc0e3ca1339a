"""The triage card of a failed switch: what died, where, with which figures, and what fits instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

from console.domain.units import format_bytes


def _bytes(value: Any) -> str:
    return format_bytes(int(value)) if isinstance(value, int | float) else "?"


class FailureCard(Static):
    """Built from the result's `failure` JSON (the same shape `switch --json` prints)."""

    COMPONENT_CLASSES = {"card--label", "card--value", "card--bad", "card--ok"}

    def show_failure(self, result: dict[str, Any], fits_instead: Sequence[str]) -> None:
        """Fill the card from a failed result and the layouts predicted to fit."""
        self.result = result
        self.fits_instead = list(fits_instead)
        failure = result.get("failure") or {}
        kind = failure.get("kind") or result.get("outcome", "failed")
        self.border_title = f"FAILED · {str(kind).replace('_', ' ').upper()}"
        self.remove_class("-hidden")
        self.update(self._text(result, failure))

    def _text(self, result: dict[str, Any], failure: dict[str, Any]) -> Text:
        s = self.get_component_rich_style
        out = Text()

        def row(label: str, value: str, style: str = "card--value") -> None:
            out.append(f"{label:<10}", style=s("card--label"))
            out.append(value + "\n", style=s(style))

        row("layout", f"{result.get('layout')} on {result.get('host')}")
        if failure.get("summary"):
            row("cause", str(failure["summary"]), "card--bad")
        if failure.get("rank"):
            row("rank", str(failure["rank"]))
        if failure.get("kind") == "cuda_oom":
            row("GPU", str(failure.get("gpu")) if failure.get("gpu") is not None else "?")
            row("tried", _bytes(failure.get("tried_bytes")), "card--bad")
            row("free", _bytes(failure.get("free_bytes")))
            row("in use", _bytes(failure.get("in_use_bytes")))
            row("total", _bytes(failure.get("total_bytes")))
        elif result.get("reason"):
            row("reason", str(result["reason"]))
        if result.get("detected_after_s") is not None:
            row("verdict", f"{result['detected_after_s']:.2f}s after the decisive journal entry")
        if self.fits_instead:
            row("fits", ", ".join(self.fits_instead), "card--ok")
        line = str(failure.get("line") or "")
        if line:
            out.append(line[:300], style=s("card--label"))
        else:
            out.rstrip()
        return out
