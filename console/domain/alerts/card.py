"""A triaged finding as an alert's annotations: the failure card in words a pager shows.

The card is what the TUI's failure card and `switch` show: the class, the summary with its figures, the
rank, what the engine was doing, what to do, and the journal line itself.
"""

from __future__ import annotations

from console.domain.sizes import format_bytes
from console.domain.values import Finding

#: The journal line carried in the description, cut (a traceback's final line can be long).
LINE_CHARS = 300


def figures_text(finding: Finding) -> str:
    """A CUDA OOM's figures in one line (`GPU 2: tried 672.00 MiB, free 224.96 MiB of 94.97 GiB`), else ""."""
    oom = finding.oom
    if oom is None:
        return ""

    def size(n: int | None) -> str:
        return "?" if n is None else format_bytes(n)

    gpu = f"GPU {oom.gpu}: " if oom.gpu is not None else ""
    text = f"{gpu}tried {size(oom.tried_bytes)}, free {size(oom.free_bytes)} of {size(oom.total_bytes)}"
    return text + (f", in use {size(oom.in_use_bytes)}" if oom.in_use_bytes is not None else "")


def card_annotations(finding: Finding) -> tuple[tuple[str, str], ...]:
    """The card's own annotations: `class`, and `rank`, `during` and `figures` where the finding has them."""
    notes = [("class", finding.cls.value)]
    if finding.rank:
        notes.append(("rank", finding.rank))
    if finding.context is not None:
        notes.append(("during", finding.context.value))
    if figures := figures_text(finding):
        notes.append(("figures", figures))
    return tuple(notes)


def card_description(finding: Finding, where: str) -> str:
    """Where it happened, the class, rank and figures, then the journal line."""
    parts = [where, f"class {finding.cls.value}"]
    if finding.rank:
        parts.append(f"rank {finding.rank}")
    if finding.context is not None:
        parts.append(f"during {finding.context.value.replace('_', ' ')}")
    if figures := figures_text(finding):
        parts.append(figures)
    text = "; ".join(parts)
    if finding.line:
        text += f". Log: {finding.line[:LINE_CHARS]}"
    return text
