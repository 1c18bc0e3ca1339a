"""The open world: fatal ends that no signature names, and the exception a log ended on.

The Triager (triage.py) asks this module twice: when a message no signature names has been read
(an exception, a C++ abort), and when the log ends without a fatal finding, to name what it ended
on: an exception logged shortly before the end, or a traceback cut off before its final line.
"""

from __future__ import annotations

from collections.abc import Iterable

from console.domain.triage.catalogue import hint_for
from console.domain.triage.classify import MAX_LINE_CHARS, QUIET_LEVELS, quiet
from console.domain.triage.normalise import Block, Pending
from console.domain.triage.root_cause import CUT_OFF_SUMMARY, as_engine_error
from console.domain.triage.signatures import clip
from console.domain.values import Finding, FindingClass

#: A log that ends at most this many lines after an unexplained exception ended with it.
END_LINES = 60


def open_world(pending: Pending) -> Finding | None:
    """An exception or a C++ abort that no signature names: `engine_error` when it ended the process,
    a `traceback` note otherwise; None for a warning with a traceback."""
    block = pending.block
    text = pending.text
    if pending.level in QUIET_LEVELS or quiet(text, None):
        return None
    if text.startswith("what():") or text.startswith("terminate called"):
        return Finding(FindingClass.ENGINE_ERROR, pending.line[:MAX_LINE_CHARS],
                       f"C++ exception: {clip(text.removeprefix('what():'), 150)}", pending.rank, True,
                       ts=pending.ts, hint=hint_for(FindingClass.ENGINE_ERROR), seq=pending.seq)
    fatal = block is not None and block.ends_engine
    cls = FindingClass.ENGINE_ERROR if fatal else FindingClass.TRACEBACK
    summary = clip(text, 160) if fatal else f"Python exception: {clip(text, 150)}"
    return Finding(cls, pending.line[:MAX_LINE_CHARS], summary, pending.rank, fatal, ts=pending.ts,
                   hint=hint_for(cls), seq=pending.seq)


def cut_off(block: Block) -> Finding | None:
    """A traceback the log ended inside, its final line never logged (a trimmed paste, a process
    killed mid-print). Its frames still say where it was raised: in a CUDA-graph capture it is
    `cuda_graph`, in the weight loader `weight_load_error`; one whose opening says it ended the
    process (or that unwinds the engine's main loop) is `engine_error`. None for any other."""
    where = f" (last frame: {clip(block.last_frame, 120)})" if block.last_frame else ""
    if block.capture:
        cls, summary = FindingClass.CUDA_GRAPH, "CUDA graph capture failed: its traceback was cut off"
    elif block.weights:
        cls, summary = FindingClass.WEIGHT_LOAD_ERROR, "Weights could not be loaded: the traceback was cut off"
    elif block.ends_engine:
        cls, summary = FindingClass.ENGINE_ERROR, CUT_OFF_SUMMARY
    else:
        return None
    line = block.headline or block.last_frame or summary
    return Finding(cls, line[:MAX_LINE_CHARS], summary + where, block.rank, True, hint=hint_for(cls),
                   seq=block.opened_at)


def ended_on(history: Iterable[Finding], loose: Finding | None, blocks: Iterable[Block],
             lines_read: int) -> Finding | None:
    """What a log with no fatal finding ended on: the last unexplained exception (a noted traceback,
    an exception line outside any, an open traceback's headline) logged at most END_LINES before the
    end, as `engine_error`; else a traceback cut off near the end (`cut_off`); else None."""
    candidates = [f for f in history if f.cls is FindingClass.TRACEBACK]
    if loose is not None:
        candidates.append(loose)
    open_blocks = [b for b in blocks if not b.handled and b.level not in QUIET_LEVELS]
    for block in open_blocks:
        if block.headline and not (block.weights or block.capture):  # those name their step (cut_off)
            candidates.append(Finding(FindingClass.TRACEBACK, block.headline[:MAX_LINE_CHARS],
                                      clip(block.headline, 160), block.rank, False, seq=block.opened_at))
    candidates = [f for f in candidates if f.seq is not None and lines_read - f.seq <= END_LINES]
    if candidates:
        return as_engine_error(max(candidates, key=lambda f: f.seq or 0))
    for block in sorted(open_blocks, key=lambda b: max(b.last_at, b.opened_at), reverse=True):
        if lines_read - max(block.last_at, block.opened_at) <= END_LINES:
            found = cut_off(block)
            if found is not None:
                return found
    return None


def end_of_log(history: list[Finding], loose: Finding | None, blocks: Iterable[Block], lines_read: int) -> Finding | None:
    """What an ended log's findings lack: when no cause is named (systemd's exit status names none),
    what it ended on (`ended_on`): an unexplained exception shortly before the end as `engine_error`,
    or a traceback cut off inside a capture, the weight loader or the engine's loop. None when a
    cause is named, or when decisive() already names that exception behind systemd's exit."""
    if any(f.fatal and f.cls is not FindingClass.UNIT_FAILED for f in history):
        return None
    last = ended_on(history, loose, blocks, lines_read)
    if last is not None and any(f.fatal for f in history) and any(
        f.cls is FindingClass.TRACEBACK and f.seq == last.seq for f in history
    ):
        return None
    return last
