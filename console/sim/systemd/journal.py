"""The simulated host's journal: one JSON-lines file per unit, with cursors.

A cursor is the byte offset at which an entry starts (`o=1234`), so resuming after it is a seek and one
skipped line: nothing is lost or repeated, whichever process reads. Writers (the unit's supervisor, or the
process manager for its own lines) append each entry with one `write()` under `flock`; readers take no
lock and hold back a partial last line until its newline arrives.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from console.domain.values import JournalEntry

#: How often a follower looks for new entries. Local file reads are cheap; 20 ms keeps detection fast.
FOLLOW_POLL_S = 0.02
#: Longest message kept per entry; engines that print megabyte lines do not break the journal.
MAX_MESSAGE_CHARS = 64 * 1024

PRIORITY_ERR = 3
PRIORITY_WARNING = 4
PRIORITY_INFO = 6


def append_entry(
    path: Path,
    message: str,
    *,
    pid: int | None = None,
    priority: int = PRIORITY_INFO,
    source: str = "unit",
    ts: float | None = None,
) -> None:
    """Append one entry to a journal file (created if missing)."""
    record = {
        "ts": time.time() if ts is None else ts,
        "msg": message[:MAX_MESSAGE_CHARS],
        "pid": pid,
        "prio": priority,
        "src": source,
    }
    data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, data)
    finally:
        os.close(fd)


def make_cursor(offset: int) -> str:
    return f"o={offset}"


def parse_cursor(cursor: str) -> int:
    """The byte offset in a cursor; ValueError if it is not one of ours."""
    key, _, value = cursor.partition("=")
    if key != "o" or not value.isdigit():
        raise ValueError(f"not a simulated-journal cursor: {cursor!r}")
    return int(value)


def _entry(unit: str, offset: int, raw: bytes) -> JournalEntry | None:
    try:
        record = json.loads(raw)
        return JournalEntry(
            cursor=make_cursor(offset),
            ts=float(record["ts"]),
            unit=unit,
            message=str(record.get("msg", "")),
            pid=record.get("pid"),
            priority=record.get("prio"),
            source=str(record.get("src", "unit")),
        )
    except (ValueError, KeyError, TypeError):
        return None  # a damaged line is skipped, not fatal


class JournalReader:
    """Reads a unit's journal file from a byte offset, entry by entry."""

    def __init__(self, path: Path, unit: str, offset: int = 0) -> None:
        self.path = path
        self.unit = unit
        self.offset = offset
        self._pending = b""

    def read_available(self) -> list[JournalEntry]:
        """Every complete entry written since the last call."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset + len(self._pending))
                chunk = fh.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        data = self._pending + chunk
        out: list[JournalEntry] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            entry = _entry(self.unit, self.offset + start, data[start:end])
            if entry is not None:
                out.append(entry)
            start = end + 1
        self.offset += start
        self._pending = data[start:]
        return out

    def skip_one(self) -> None:
        """Move past the entry at the current offset (the one a cursor names)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                line = fh.readline()
        except FileNotFoundError:
            return
        if line.endswith(b"\n"):
            self.offset += len(line)


def tail_offset(path: Path, lines: int) -> int:
    """The offset of the `lines`-th last entry (the file's end for 0)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if lines <= 0:
        return size
    with open(path, "rb") as fh:
        pos, found, block = size, 0, 64 * 1024
        # The last byte is the final newline; count newlines before it, walking backwards.
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            search_end = len(chunk) if pos + step < size else len(chunk) - 1
            idx = chunk.rfind(b"\n", 0, search_end)
            while idx >= 0:
                found += 1
                if found == lines:
                    return pos + idx + 1
                idx = chunk.rfind(b"\n", 0, idx)
    return 0


def read_all(path: Path, unit: str) -> Iterator[JournalEntry]:
    """Every entry of a journal file, oldest first."""
    yield from JournalReader(path, unit).read_available()


async def follow_journal(
    path: Path,
    unit: str,
    *,
    after_cursor: str | None = None,
    follow: bool = True,
    lines: int | None = None,
    poll_s: float = FOLLOW_POLL_S,
) -> AsyncIterator[JournalEntry]:
    """Entries of a unit's journal, oldest first, then (with `follow`) new ones as they are written.

    Args:
        path: the unit's journal file.
        unit: the unit name put into each entry.
        after_cursor: start exactly after this entry.
        follow: keep waiting for new entries instead of ending at the current end.
        lines: without a cursor, start this many entries before the end (None: from the beginning).
        poll_s: how long to sleep when nothing new has arrived.
    """
    if after_cursor is not None:
        reader = JournalReader(path, unit, parse_cursor(after_cursor))
        reader.skip_one()
    elif lines is not None:
        reader = JournalReader(path, unit, tail_offset(path, lines))
    else:
        reader = JournalReader(path, unit)
    while True:
        batch = reader.read_available()
        for entry in batch:
            yield entry
        if not follow:
            return
        if not batch:
            await asyncio.sleep(poll_s)
