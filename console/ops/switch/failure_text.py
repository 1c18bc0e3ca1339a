"""One renderer of a failed switch: a pure function from the typed result to labelled rows.

The TUI's triage card and the CLI's plain verdict both print these rows, so a failure reads the
same wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.domain.models import Finding, FindingClass
from console.domain.units import GIB, MIB, format_bytes
from console.ops.switch.events import SwitchResult

BAD, OK = "bad", "ok"


@dataclass(frozen=True, slots=True)
class FailureRow:
    """One labelled fact; `tone` is "bad", "ok" or "" (plain)."""

    label: str
    value: str
    tone: str = ""


def _size(n: int | None) -> str:
    return "?" if n is None else format_bytes(n)


def failure_kind(result: SwitchResult) -> str:
    """The failure's class in capitals (`CUDA OOM`), or the outcome's when nothing was triaged."""
    kind = result.failure.cls.value if result.failure is not None else result.outcome
    return kind.replace("_", " ").upper()


def _round_size(n: int | None) -> str:
    """A size for the one-line headline: whole MiB (`672 MiB`), GiB as PyTorch writes them."""
    if n is None:
        return "?"
    if 100 * MIB <= abs(n) < GIB:
        return f"{n / MIB:.0f} MiB"
    return format_bytes(n)


def headline(result: SwitchResult) -> str:
    """The failure in one line: `CUDA OOM · GPU 2 · tried 672 MiB · 225 MiB free of 94.97 GiB`."""
    failure = result.failure
    if failure is None:
        return f"{result.outcome.upper()} · {result.reason}" if result.reason else result.outcome.upper()
    oom = failure.oom
    if failure.cls is FindingClass.CUDA_OOM and oom is not None:
        parts = [failure_kind(result)]
        if oom.gpu is not None:
            parts.append(f"GPU {oom.gpu}")
        parts.append(f"tried {_round_size(oom.tried_bytes)}")
        parts.append(f"{_round_size(oom.free_bytes)} free of {_round_size(oom.total_bytes)}")
        return " · ".join(parts)
    return f"{failure_kind(result)} · {failure.summary}"


def oom_rows(failure: Finding) -> list[FailureRow]:
    """A CUDA OOM's figures, one row each."""
    oom = failure.oom
    if oom is None:
        return []
    return [
        FailureRow("GPU", str(oom.gpu) if oom.gpu is not None else "?"),
        FailureRow("tried", _size(oom.tried_bytes), BAD),
        FailureRow("free", _size(oom.free_bytes)),
        FailureRow("in use", _size(oom.in_use_bytes)),
        FailureRow("total", _size(oom.total_bytes)),
    ]


def failure_rows(result: SwitchResult, fits_instead: Sequence[str] = (), *, with_line: bool = True) -> list[FailureRow]:
    """Every fact the card shows about a failed (or timed-out, or refused) switch, in order."""
    failure = result.failure
    rows = [FailureRow("layout", f"{result.layout} on {result.host}")]
    if failure is not None:
        rows.append(FailureRow("cause", failure.summary, BAD))
        if failure.rank:
            rows.append(FailureRow("rank", failure.rank))
        if failure.context is not None:
            rows.append(FailureRow("during", failure.context.value.replace("_", " ")))
        rows += oom_rows(failure)
    if result.reason and (failure is None or failure.oom is None):
        rows.append(FailureRow("reason", result.reason))
    if result.detected_after_s is not None:
        rows.append(FailureRow("verdict", f"{result.detected_after_s:.2f}s after the decisive journal entry"))
    if fits_instead:
        rows.append(FailureRow("fits", ", ".join(fits_instead), OK))
    if failure is not None and failure.hint:
        rows.append(FailureRow("do", failure.hint, OK))
    if failure is not None and failure.consequences:
        rows.append(FailureRow("then", "; ".join(c.summary for c in failure.consequences[:3])))
    if with_line and failure is not None and failure.line:
        rows.append(FailureRow("", failure.line[:300]))  # the journal line itself, unlabelled
    return rows
