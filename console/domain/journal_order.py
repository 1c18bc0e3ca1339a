"""The journal read in time: where a late entry belongs, and systemd's lines with their own time.

Entries of several units arrive unit by unit (the pane follows one unit, then resumes another after its
cursor), so a stop line written before an OOM can arrive after it. Journal timestamps order them.
An engine prints its own time in each line; systemd's lines (`Stopping ...`, `Main process exited`)
carry none in their text, only in the journal, so they are shown with it, as journalctl does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence


def insertion_index(stamps: Sequence[float | None], ts: float | None) -> int:
    """Where an entry stamped `ts` goes among stored entries stamped `stamps` (oldest first).

    After every entry at or before `ts`, so entries with equal stamps keep their arrival order. An
    unstamped entry (a header the pane writes) goes at the end; a stored one heads the entries after
    it, so a late entry goes before it. `stamps` is read from the end, so an entry in
    order costs one comparison.
    """
    i = len(stamps)
    if ts is None:
        return i
    while i > 0:
        before = stamps[i - 1]
        if before is not None and before <= ts:
            return i
        i -= 1
    return 0


def systemd_text(message: str, ts: float | None, *, utc: bool = False) -> str:
    """systemd's line as journalctl's short format shows it: `Dec 01 09:16:13 systemd[1]: Stopping ...`."""
    if ts is None:
        return f"systemd[1]: {message}"
    moment = time.gmtime(ts) if utc else time.localtime(ts)
    return f"{time.strftime('%b %d %H:%M:%S', moment)} systemd[1]: {message}"
