"""The journal view's storage: lines in journal-time order, the rows a filter shows, findings, probes.

No Textual here. Lines are numbered by `seq` in the order they are shown, with no gaps, so a line's
index is `seq - first seq`. A batch whose lines are all newer than the last stored one is appended
(the common case, one comparison a line). An entry older than the newest stored one (a unit the pane
comes back to resumes after its cursor with entries written before the ones shown since) moves to
where its journal time is, among the last REORDER_WINDOW lines; the moved part is renumbered.

The console's own probe requests (`console.domain.probe_lines`) are folded out of the rows unless
`show_probes`; `probe_count` tells how many stored lines that hides.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

from console.domain.journal_order import insertion_index
from console.domain.probe_lines import is_probe_line
from console.domain.values import Finding
from console.ui.widgets.journal_lines import JournalLine, LineFilter, clean_text

#: How far back from the newest line a late entry may move (a bounded cost per late batch).
REORDER_WINDOW = 5000

Item = tuple[str, str, float | None, Finding | None]


class Appended(NamedTuple):
    """What one batch did."""

    longest: int
    """The longest text in it, in characters."""
    removed: int
    """Lines that fell off the top for the cap (while no row list is kept)."""
    reordered: bool
    """Late lines moved in among stored ones, so stored lines changed rows."""


class JournalStore:
    """Bounded, time-ordered journal lines with the rows a filter and the probe fold leave."""

    def __init__(self, line_cap: int) -> None:
        self.line_cap = line_cap
        self.lines: list[JournalLine] = []
        self.rows: list[int] | None = None
        """Seqs shown, while a filter or the probe fold hides some; None while every line shows."""
        self.findings: list[int] = []
        self.next_seq = 0
        self.dropped = 0
        self.probe_count = 0
        self.line_filter: LineFilter | None = None
        self.show_probes = False
        self.cursor_seq: int | None = None
        self._last_ts: float | None = None

    # -- reading -------------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.rows) if self.rows is not None else len(self.lines)

    @property
    def hidden_probes(self) -> int:
        """Stored probe lines the fold hides now (0 while they are shown)."""
        return 0 if self.show_probes else self.probe_count

    def row_seq(self, row: int) -> int | None:
        if row < 0 or row >= self.row_count:
            return None
        return self.rows[row] if self.rows is not None else self.lines[row].seq

    def line_by_seq(self, seq: int) -> JournalLine | None:
        if not self.lines:
            return None
        index = seq - self.lines[0].seq
        return self.lines[index] if 0 <= index < len(self.lines) else None

    def row_of_seq(self, seq: int) -> int | None:
        if self.rows is None:
            index = seq - self.lines[0].seq if self.lines else -1
            return index if 0 <= index < len(self.lines) else None
        row = bisect_left(self.rows, seq)
        return row if row < len(self.rows) and self.rows[row] == seq else None

    def visible_seqs(self) -> list[int]:
        return self.rows if self.rows is not None else [line.seq for line in self.lines]

    def shows(self, line: JournalLine) -> bool:
        if line.probe and not self.show_probes:
            return False
        return self.line_filter is None or self.line_filter.matches(line)

    # -- writing -------------------------------------------------------------------------------------
    def append(self, items: Sequence[Item]) -> Appended:
        """Store a batch (lines older than the newest stored one go where their time is)."""
        old_first = self.lines[0].seq if self.lines else self.next_seq
        new: list[JournalLine] = []
        longest = 0
        late = False
        last = self._last_ts
        seq = self.next_seq  # the number each line gets when it goes at the end, as nearly all do
        for text, unit, ts, finding in items:
            text = clean_text(text)
            probe = finding is None and is_probe_line(text)
            new.append(JournalLine(seq, text, unit, ts, finding, probe))
            seq += 1
            if ts is not None:
                if last is not None and ts < last:
                    late = True
                else:
                    last = ts
            if len(text) > longest:
                longest = len(text)
        self._last_ts = last
        self.probe_count += sum(1 for line in new if line.probe)
        if late:
            self._merge(new)
        else:
            self._extend(new)
        if self.rows is None and self.line_filter is None and self.hidden_probes:
            self._rebuild_rows()  # the first probe line to fold: from now on the rows say what shows
        self._trim()
        removed = self.lines[0].seq - old_first if self.lines and self.rows is None else 0
        return Appended(longest, max(0, removed), late)

    def _extend(self, new: list[JournalLine]) -> None:
        seq = self.next_seq
        rows = self.rows
        for i, line in enumerate(new):
            if line.seq != seq:  # a merge renumbers the lines after the late one
                line = new[i] = line._replace(seq=seq)
            if line.finding is not None:
                self.findings.append(seq)
            if rows is not None and self.shows(line):
                rows.append(seq)
            seq += 1
        self.next_seq = seq
        self.lines.extend(new)

    def _merge(self, new: list[JournalLine]) -> None:
        start = max(0, len(self.lines) - REORDER_WINDOW)
        tail = self.lines[start:]
        base = tail[0].seq if tail else self.next_seq
        cursor = self.line_by_seq(self.cursor_seq) if self.cursor_seq is not None else None
        stamps = [line.ts for line in tail]
        newest = max((t for t in stamps if t is not None), default=None)
        for line in new:
            # An unstamped line (the pane's `── unit ──` header) goes at the end, and counts as the
            # newest time there, so the lines that follow it in the batch come after it.
            stamp = line.ts if line.ts is not None else newest
            i = insertion_index(stamps, stamp)
            tail.insert(i, line)
            stamps.insert(i, stamp)
            if stamp is not None and (newest is None or stamp > newest):
                newest = stamp
        del self.lines[start:]
        del self.findings[bisect_left(self.findings, base):]
        if self.rows is not None:
            del self.rows[bisect_left(self.rows, base):]
        self.next_seq = base
        cursor_index = next((i for i, line in enumerate(tail) if line is cursor), None) if cursor else None
        self._extend(tail)
        if cursor_index is not None:
            self.cursor_seq = base + cursor_index

    def _trim(self) -> None:
        excess = len(self.lines) - self.line_cap
        if excess <= 0:
            return
        self.probe_count -= sum(1 for line in self.lines[:excess] if line.probe)
        del self.lines[:excess]
        self.dropped += excess
        first = self.lines[0].seq
        del self.findings[: bisect_left(self.findings, first)]
        if self.rows is not None:
            del self.rows[: bisect_left(self.rows, first)]
        if self.cursor_seq is not None and self.cursor_seq < first:
            self.cursor_seq = None

    def clear(self) -> None:
        self.lines.clear()
        self.findings.clear()
        self.probe_count = 0
        self._last_ts = None
        self.cursor_seq = None
        self._rebuild_rows()

    # -- what shows ----------------------------------------------------------------------------------
    def set_filter(self, line_filter: LineFilter | None) -> None:
        self.line_filter = line_filter
        self._rebuild_rows()

    def set_show_probes(self, show: bool) -> None:
        self.show_probes = show
        self._rebuild_rows()

    def _rebuild_rows(self) -> None:
        if self.line_filter is None and (self.show_probes or not self.probe_count):
            self.rows = None
        else:
            self.rows = [line.seq for line in self.lines if self.shows(line)]
