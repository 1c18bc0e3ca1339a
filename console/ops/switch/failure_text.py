"""One renderer of a failed switch: a pure function from the typed result to labelled rows.

The TUI's triage card and the CLI's plain verdict both print these rows, so a failure reads the
same wherever it is shown. What to do fits the failure: an OOM of weights that alone exceed the GPU
(the switch's fit says so) is no memory flag's to fix, so the advice names the layouts that fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from console.domain.sizes import GIB, MIB, format_bytes
from console.domain.triage import WEIGHTS_OOM_HINT
from console.domain.values import Finding, FindingClass
from console.ops.switch.events import SwitchResult

BAD, OK = "bad", "ok"
#: How the CLI's reader picks another layout (the card says which key opens its layout picker).
PICK_ON_THE_CLI = "serve-console switch LAYOUT"
_WEIGHTS_NEED = "the weights alone need "


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


def weights_alone_exceed(result: SwitchResult) -> float | None:
    """The weights' GiB per GPU when the failure is a CUDA OOM and the switch's fit knows the weights
    alone need more than the GPU holds; else None."""
    fit = result.fit or {}
    weights, gpu = fit.get("weights_gib_per_gpu"), fit.get("gpu_mem_gib")
    failure = result.failure
    if failure is None or failure.cls is not FindingClass.CUDA_OOM or not weights or not gpu:
        return None
    return float(weights) if weights > gpu else None


def advice(result: SwitchResult, fits_instead: Sequence[str] = (), pick: str = PICK_ON_THE_CLI) -> str | None:
    """What to do about a failure: for weights that alone exceed the GPU, or an OOM while they loaded
    (triage says so: WEIGHTS_OOM_HINT), the weights' GiB per GPU and the layouts that fit (the switch's
    own prediction, else `fits_instead`) and how to pick one; else the finding's hint, which triage
    wrote in the service's engine's own flags."""
    failure = result.failure
    weights = weights_alone_exceed(result)
    while_loading = failure is not None and failure.cls is FindingClass.CUDA_OOM and (
        failure.hint == WEIGHTS_OOM_HINT or (failure.hint or "").startswith(_WEIGHTS_NEED))
    if weights is None and while_loading and (result.fit or {}).get("weights_gib_per_gpu"):
        weights = float(result.fit["weights_gib_per_gpu"])
    if weights is None:
        return failure.hint if failure is not None else None
    fits = [name.removesuffix(" (fits)") for name in (result.fit or {}).get("fits_instead") or fits_instead]
    text = f"{_WEIGHTS_NEED}{weights:.2f} GiB per GPU"
    if fits:
        return f"{text}; layouts that fit: {', '.join(fits)} ({pick})"
    if weights_alone_exceed(result) is None:
        return f"{text}, and the GPU ran out of memory while they loaded: spread them over more GPUs (TP, PP or EP)"
    return f"{text}, more than the GPU holds: spread them over more GPUs (TP, PP or EP)"


def with_advice(result: SwitchResult) -> SwitchResult:
    """The result with its failure's hint the advice above, so `switch --json`'s `failure.hint`, the audit
    and every reader of the finding say what the card says (a weights OOM names the layouts that fit)."""
    failure = result.failure
    if failure is None or failure.cls is not FindingClass.CUDA_OOM:
        return result
    todo = advice(result)
    return result if todo is None or todo == failure.hint else replace(result, failure=replace(failure, hint=todo))


def failure_rows(
    result: SwitchResult, fits_instead: Sequence[str] = (), *, with_line: bool = True, pick: str = PICK_ON_THE_CLI
) -> list[FailureRow]:
    """Every fact the card shows about a failed (or timed-out, or refused) switch, in order; `pick`
    says how to pick another layout (the card names its key)."""
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
    if result.evidence is not None:
        rows.append(FailureRow("evidence", result.evidence))
    if result.bundle is not None:
        rows.append(FailureRow("bundle", result.bundle))
    if fits_instead:
        rows.append(FailureRow("fits", ", ".join(fits_instead), OK))
    if todo := advice(result, fits_instead, pick):
        rows.append(FailureRow("do", todo, OK))
    if failure is not None and failure.consequences:
        rows.append(FailureRow("then", "; ".join(c.summary for c in failure.consequences[:3])))
    if with_line and failure is not None and failure.line:
        rows.append(FailureRow("", failure.line[:300]))  # the journal line itself, unlabelled
    return rows
