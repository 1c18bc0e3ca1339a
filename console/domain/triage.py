"""Failure triage: engine and systemd log lines -> typed findings.

`classify_line` reads one line on its own. `Triager` reads a stream: it follows Python traceback
blocks (`Traceback (most recent call last):` ... `XxxError: message`) and reports the final
exception line once, with the rank that opened the block, and it reports an error repeated by many
ranks once per rank, never the same line twice.

Speed: an ordinary line is rejected by plain substring checks before any regex runs, so the
journal pane can classify tens of thousands of lines per second (bench/triage_throughput.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from console.domain.models import Engine, Finding, FindingClass
from console.domain.rank import LineHeader, parse_rank, split_header
from console.domain.signatures import GATES, clip, read_signature

__all__ = ["Triager", "classify_line", "parse_rank", "triage_lines"]

TRACEBACK_MARKER = "Traceback (most recent call last):"
#: Finding.line keeps at most this many characters of a (possibly 1 MB) line.
MAX_LINE_CHARS = 2000
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING"})
# The last line of a traceback: `ValueError: msg`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`.
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w{0,80}\.){0,8}(?P<name>[A-Za-z_]\w{0,80})(?::(?: |$)|$)")
# Lines (of any writer) after which an open traceback is dropped: its final line never came.
_BLOCK_LINES = 400
_MAX_OPEN_BLOCKS = 64
# Lines (of any writer) after a traceback's final line that may continue its message.
_TAIL_LINES = 40


def _may_match(line: str) -> bool:
    """False when the line holds no signature's needle: the whole cost of an ordinary line."""
    for gate in GATES:
        if gate in line:
            return True
    return False


def _classify(line: str, header: LineHeader, rank: str | None, ts: float | None) -> Finding | None:
    payload = header.payload
    if payload[:1] in (" ", "\t"):
        return None  # a traceback frame or quoted source code, not a message
    found = read_signature(payload, rank)
    if found is None:
        return None
    cls, (summary, fatal, figures) = found
    if header.level in _QUIET_LEVELS:
        fatal = False  # the engine itself logged it below ERROR
    return Finding(
        cls=cls, line=line[:MAX_LINE_CHARS], summary=summary, rank=rank, fatal=fatal, oom=figures, ts=ts
    )


def classify_line(line: str) -> Finding | None:
    """Classify one log line on its own.

    Args:
        line: One line of engine or systemd output, with or without a journal prefix.

    Returns:
        A finding, or None for an ordinary line (including the harmless NCCL bind warning).
    """
    if not _may_match(line):
        return None
    line = line.rstrip("\r\n")
    header = split_header(line)
    return _classify(line, header, header.rank, None)


def _exception_name(payload: str) -> str | None:
    m = _EXCEPTION_LINE.match(payload)
    if m is None:
        return None
    name = m.group("name")
    if name[0].isupper() or "Error" in name or "Exception" in name:
        return name
    return None


@dataclass(slots=True)
class _Block:
    """An open traceback of one writer."""

    rank: str | None
    opened_at: int  # the Triager's line count when the block opened


@dataclass(slots=True)
class _Tail:
    """The lines right after a traceback's final line: they may continue its message."""

    rank: str | None
    cls: FindingClass
    opened_at: int


class Triager:
    """Reads a log stream line by line and reports each failure once per rank.

    Args:
        engine: The engine behind the log, when known (kept for callers; triage reads both engines).
        max_remembered: How many distinct findings to remember for de-duplication.
    """

    def __init__(self, engine: Engine | None = None, *, max_remembered: int = 4096) -> None:
        self.engine = engine
        self._max_remembered = max_remembered
        self._blocks: dict[str, _Block] = {}
        self._tails: dict[str, _Tail] = {}
        self._seen: dict[tuple[FindingClass, str | None, str], None] = {}
        self._count = 0

    def reset(self) -> None:
        """Forget open tracebacks and reported findings: call it when the engine starts afresh, so a
        failure that recurs in the new start is reported again."""
        self._blocks.clear()
        self._tails.clear()
        self._seen.clear()

    def feed(self, line: str, ts: float | None = None) -> list[Finding]:
        """Read one line.

        Args:
            line: One log line (a trailing newline is ignored).
            ts: When the line was logged (POSIX seconds), copied into the finding.

        Returns:
            The findings this line completes: usually none, at most one.
        """
        self._count += 1
        ordinary = not _may_match(line) and TRACEBACK_MARKER not in line
        if self._blocks or self._tails:
            self._expire()
        elif ordinary:
            return []  # the common case: no open traceback, no needle
        line = line.rstrip("\r\n")
        header = split_header(line)
        payload = header.payload
        if TRACEBACK_MARKER in payload:
            self._tails.pop(header.stream, None)
            self._blocks.pop(header.stream, None)
            if len(self._blocks) >= _MAX_OPEN_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[header.stream] = _Block(rank=header.rank, opened_at=self._count)
            return []
        block = self._blocks.get(header.stream)
        if block is not None:
            done, finding = self._continue_block(block, line, header, ts)
            if done:
                return self._report(finding)
        if ordinary:
            return []
        return self._report(self._plain_line(line, header, ts))

    def _expire(self) -> None:
        """Drop tracebacks whose final line never came, and tails that ran out."""
        for stream in [k for k, b in self._blocks.items() if self._count - b.opened_at > _BLOCK_LINES]:
            del self._blocks[stream]
        for stream in [k for k, t in self._tails.items() if self._count - t.opened_at > _TAIL_LINES]:
            del self._tails[stream]

    def _continue_block(
        self, block: _Block, line: str, header: LineHeader, ts: float | None
    ) -> tuple[bool, Finding | None]:
        """Advance an open traceback; (True, finding) when this line was part of it."""
        payload = header.payload
        if not payload.strip() or payload[0] in (" ", "\t"):
            return True, None  # a frame, its source line, or a blank line
        name = _exception_name(payload)
        if name is None:
            if header.rank is None and header.level is None:
                del self._blocks[header.stream]  # an untagged line that is no exception: not a traceback
            return False, None  # a line of another rank, logged in between
        del self._blocks[header.stream]
        rank = header.rank or block.rank
        finding = _classify(line, header, rank, ts)
        if finding is None:
            finding = Finding(
                cls=FindingClass.TRACEBACK,
                line=line[:MAX_LINE_CHARS],
                summary=f"Python exception: {clip(payload, 150)}",
                rank=rank,
                fatal=False,  # unclassified: the unit state or a classified line says whether it was fatal
                ts=ts,
            )
        self._tails[header.stream] = _Tail(rank=rank, cls=finding.cls, opened_at=self._count)
        return True, finding

    def _plain_line(self, line: str, header: LineHeader, ts: float | None) -> Finding | None:
        tail = self._tails.get(header.stream)
        if tail is None:
            return _classify(line, header, header.rank, ts)
        # systemd's own lines about the unit belong to no rank, whatever the engine logged last.
        rank = header.rank or (None if _is_systemd_line(header.payload) else tail.rank)
        finding = _classify(line, header, rank, ts)
        if finding is not None and finding.cls == tail.cls:
            return None  # the same error's message, continued (NCCL's `ncclUnhandledCudaError: ...`)
        return finding

    def _report(self, finding: Finding | None) -> list[Finding]:
        if finding is None:
            return []
        key = (finding.cls, finding.rank, finding.summary)
        if key in self._seen:
            return []
        if len(self._seen) >= self._max_remembered:
            self._seen.pop(next(iter(self._seen)))
        self._seen[key] = None
        return [finding]


def _is_systemd_line(payload: str) -> bool:
    """A line systemd writes about a unit (`UNIT: Main process exited, ...`), not the engine's output."""
    unit, sep, _ = payload.partition(": ")
    return bool(sep) and unit.endswith((".service", ".scope")) and " " not in unit


def triage_lines(lines: Iterable[str], engine: Engine | None = None) -> list[Finding]:
    """All findings of a log, in order, each failure once per rank.

    Args:
        lines: The log's lines.
        engine: The engine behind the log, when known.

    Returns:
        The findings.
    """
    triager = Triager(engine)
    out: list[Finding] = []
    for line in lines:
        out.extend(triager.feed(line))
    return out

