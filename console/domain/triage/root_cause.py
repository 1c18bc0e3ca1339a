"""The decisive finding of a failure: its root cause, with its consequences folded under it.

One failure leaves several findings: a worker's OOM, the engine's "initialization failed" summary,
systemd's exit status; an NCCL watchdog that reports an illegal memory access; a Python exception and
the process dying of it. The decisive one is the first in the chain of causes: the finding of the
lowest tier (catalogue.py) and, within a tier, the earliest. An engine's or systemd's summary of a
death never wins over an exception logged just before it: that exception becomes the open-world
`engine_error` it explains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from console.domain.triage.catalogue import OPEN, SUMMARY, hint_for, tier_of
from console.domain.triage.signatures_host import BARE_KILL_SUMMARY
from console.domain.values import Finding, FindingClass

#: An unexplained exception explains a death only if it was logged at most this many lines before it.
CAUSE_WINDOW_LINES = 400
#: At most this many consequences are kept under the decisive finding.
MAX_CONSEQUENCES = 32
_EXCEPTION_PREFIX = "Python exception: "
#: What open_world.cut_off says of a traceback whose final line never came.
CUT_OFF_SUMMARY = "The engine died of an exception whose traceback was cut off"
#: What a note says of an exception after which its writer went on serving (Triager._went_on_serving).
OUTLIVED_SUFFIX = " (the engine went on serving after it)"


def outlived(finding: Finding) -> Finding:
    """An exception its process outlived: a note, never the cause of a later death."""
    summary = finding.summary.removeprefix(_EXCEPTION_PREFIX)
    return replace(finding, cls=FindingClass.TRACEBACK, fatal=False, summary=_EXCEPTION_PREFIX + summary + OUTLIVED_SUFFIX,
                   hint=hint_for(FindingClass.TRACEBACK))


def as_engine_error(finding: Finding) -> Finding:
    """An unclassified exception, now known to have ended the process: a fatal `engine_error`."""
    summary = finding.summary.removeprefix(_EXCEPTION_PREFIX)
    return replace(
        finding, cls=FindingClass.ENGINE_ERROR, summary=summary, fatal=True, hint=hint_for(FindingClass.ENGINE_ERROR)
    )


def _order(finding: Finding, index: int) -> tuple[int, int]:
    return tier_of(finding.cls), index


def decisive(findings: Sequence[Finding]) -> Finding | None:
    """The root cause among a failure's findings, its consequences folded under it.

    Args:
        findings: The findings of one start (or one log), in the order they were logged.

    Returns:
        The decisive finding (with `consequences` set), or None when no finding is fatal.
    """
    fatal = [(i, f) for i, f in enumerate(findings) if f.fatal]
    if not fatal:
        return None
    if fatal[0][1].summary != BARE_KILL_SUMMARY:
        # A bare `Killed` after the engine already reported a fatal error is that error's end (SGLang
        # kills its own process tree when a start fails), not a host OOM.
        fatal = [(i, f) for i, f in fatal if f.summary != BARE_KILL_SUMMARY]
    at, best = min(fatal, key=lambda item: _order(item[1], item[0]))
    if best.cls is FindingClass.CUDA_OOM and not _has_figures(best):
        # The same OOM, told with its figures by another rank or a later line, says more.
        at, best = next(((i, f) for i, f in fatal if f.cls is best.cls and _has_figures(f)), (at, best))
    if tier_of(best.cls) >= OPEN:
        cause = _earlier_exception(findings, at, best)
        if cause is not None:
            at, best = cause[0], as_engine_error(cause[1])
        elif (warned := _earlier_nccl_warning(findings, at, best)) is not None:
            at, best = warned[0], replace(warned[1], fatal=True)
    consequences = tuple(
        f for i, f in enumerate(findings) if i != at and (f.fatal or f.cls is FindingClass.TRACEBACK)
    )[:MAX_CONSEQUENCES]
    return replace(best, consequences=consequences, hint=best.hint or hint_for(best.cls))


def _earlier_nccl_warning(findings: Sequence[Finding], at: int, best: Finding) -> tuple[int, Finding] | None:
    """An NCCL warning logged shortly before a death that says nothing of its own (a traceback cut
    off, systemd's or the engine's summary): the collective it reports failing is the likeliest cause."""
    if not (tier_of(best.cls) >= SUMMARY or best.summary.startswith(CUT_OFF_SUMMARY)):
        return None
    for i, f in enumerate(findings[:at]):
        if f.cls is FindingClass.NCCL and not f.fatal and _shortly_before(f, best):
            return i, f
    return None


def _shortly_before(cause: Finding, death: Finding) -> bool:
    """Whether `cause` was logged at most CAUSE_WINDOW_LINES before `death` (or either has no line)."""
    return cause.seq is None or death.seq is None or death.seq - cause.seq <= CAUSE_WINDOW_LINES


def _has_figures(finding: Finding) -> bool:
    return finding.oom is not None and finding.oom.total_bytes is not None


def _earlier_exception(findings: Sequence[Finding], at: int, best: Finding) -> tuple[int, Finding] | None:
    """The first unexplained exception logged shortly before a death that names no cause of its own."""
    for i, f in enumerate(findings[:at]):
        if f.cls is not FindingClass.TRACEBACK or f.summary.endswith(OUTLIVED_SUFFIX):
            continue
        if not _shortly_before(f, best):
            continue
        if tier_of(best.cls) >= SUMMARY or best.cls is FindingClass.ENGINE_ERROR:
            return i, f
    return None
