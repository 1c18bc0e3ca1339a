"""Where one start of a unit ends and the next begins, in a log that holds several.

A journal often holds several starts of one unit: systemd restarting it after a failure, an operator's
restart, a container's restart policy. Each start is read on its own (the Triager forgets the last one
at each boundary): its decisive finding is its own, a failure that recurs is reported again, and no
rule links a finding of one start to another's.

A start begins at systemd's own `Started ...` line, once the start before it logged anything, or at
the engine's first line of a start (SGLang's `server_args=ServerArgs(`, vLLM's version banner) when
the engine had already opened this start or the start had already ended. systemd's lines between two
starts (`Starting ...`, `Scheduled restart job`) are no start's content. Between systemd's starts,
systemd said how the last one ended; a start the engine's first line ends said nothing of its end,
so what it was in the middle of (a traceback cut off) is read as the end of a log.
"""

from __future__ import annotations

from console.domain.log_origin import (
    STOP_MARK,
    STOPPING,
    SYSTEMD_STARTED,
    asks_to_stop,
    by_systemd,
    opens_engine_start,
)
from console.domain.rank import split_header
from console.domain.values import Finding, FindingClass

#: What began a new start (StartTracker.read).
BY_SYSTEMD = "systemd"
BY_ENGINE = "engine"

#: Findings of one start kept, oldest dropped first.
MAX_HISTORY = 512


class StartFindings:
    """The findings reported in the current start, each failure once per rank, oldest first.

    Args:
        max_remembered: How many distinct findings to remember for de-duplication.
    """

    __slots__ = ("_max_remembered", "_seen", "history")

    def __init__(self, max_remembered: int) -> None:
        self._max_remembered = max_remembered
        self._seen: dict[tuple[FindingClass, str | None, str], None] = {}
        self.history: list[Finding] = []

    def add(self, finding: Finding) -> bool:
        """Keep a finding; False when this start already reported it (its class, rank and summary)."""
        key = (finding.cls, finding.rank, finding.summary)
        if key in self._seen:
            return False
        if len(self._seen) >= self._max_remembered:
            self._seen.pop(next(iter(self._seen)))
        self._seen[key] = None
        self.history.append(finding)
        if len(self.history) > MAX_HISTORY:
            del self.history[: len(self.history) - MAX_HISTORY]
        return True

    def clear(self) -> None:
        """Forget them all: a new start begins."""
        self._seen.clear()
        self.history.clear()


class StartTracker:
    """Says which line begins a new start.

    Attributes:
        starts: How many starts the log has shown so far (1 until a second begins).
        began_at: The line count (the Triager's `seq`) of the line that began the current start; 0 for
            the log's first start.
    """

    __slots__ = ("_content", "_ended", "_engine_opened", "began_at", "starts", "stopping")

    def __init__(self) -> None:
        self.starts = 1
        self.began_at = 0
        self.stopping = False  # a stop was asked for in this start: what fails after it is the stop's doing
        self._content = False  # the engine wrote a line, or a finding was reported, in this start
        self._engine_opened = False  # the engine's first line was seen in this start
        self._ended = False  # a fatal finding was reported in this start

    def note(self, finding: Finding) -> None:
        """A finding was reported in the current start."""
        self._content = True
        self._ended = self._ended or finding.fatal

    def read(self, line: str, seq: int, systemd: bool | None) -> str | None:
        """Whether this line begins a new start: BY_SYSTEMD (its `Started` line) or BY_ENGINE (the
        engine's first line), else None. Every line passes here; an ordinary one costs four substring
        scans.

        Args:
            line: The line.
            seq: Its number in the stream.
            systemd: Whether systemd wrote it, as its journal entry says; None for a pasted log.
        """
        # Cheap gates first (every line passes here): each INTERRUPTED phrase holds one of these.
        if not self.stopping and (STOPPING in line or "SIG" in line or "ignal" in line or "nterrupt" in line
                                  or "^C" in line or STOP_MARK in line):
            self.stopping = asks_to_stop(line, systemd)
        if (SYSTEMD_STARTED not in line and "server_args=" not in line and "server version" not in line
                and "█  version" not in line):
            if not self._content:
                self._content = systemd is False or (systemd is None and not by_systemd(split_header(line), None))
            return None
        header = split_header(line, deep=True)
        payload = header.payload
        if payload.startswith(SYSTEMD_STARTED) and by_systemd(header, systemd):
            new, engine = self._content, False
        elif systemd is not True and opens_engine_start(payload):
            new, engine = self._engine_opened or self._ended, True
        else:
            self._content = self._content or not by_systemd(header, systemd)
            return None
        if new:
            self.starts += 1
            self.began_at = seq
            self._ended = False
            self._engine_opened = False
            self.stopping = False
        self._engine_opened = self._engine_opened or engine
        self._content = engine
        if not new:
            return None
        return BY_ENGINE if engine else BY_SYSTEMD
