"""Reading /proc: whether a pid is alive and when it started (one reader for the sim host and the audit log)."""

from __future__ import annotations


def proc_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, which tells a live pid from a reused one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])  # field 22 overall; fields[0] is field 3 (the state)
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int | None, start_ticks: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when given, started at `start_ticks`."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    if not fields or fields[0] in ("Z", "X"):
        return False
    return start_ticks is None or proc_start_ticks(pid) == start_ticks
