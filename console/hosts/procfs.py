"""Reading /proc: whether a pid or a process group is alive and when it started (one reader for the sim host
and the audit log)."""

from __future__ import annotations

import os


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (fields[0] is the state), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    return _after_name(stat)


def _after_name(stat: str) -> list[str]:
    """The fields of a /proc/PID/stat text after the command name, which may hold spaces and parentheses."""
    return stat.rpartition(")")[2].split()


def process_state(pid: int) -> str | None:
    """The process's state letter (`R`, `S`, `T` stopped, `Z` zombie, ...), or None when it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def stat_state(text: str) -> str | None:
    """The state letter in the text of a /proc/PID/stat (read over a transport), or None."""
    fields = _after_name(text)
    return fields[0] if fields and len(fields[0]) == 1 else None


def proc_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, which tells a live pid from a reused one."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 overall; fields[0] is field 3 (the state)
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int | None, start_ticks: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when given, started at `start_ticks`."""
    if not pid:
        return False
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return start_ticks is None or proc_start_ticks(pid) == start_ticks


def group_alive(pgid: int) -> bool:
    """True if the process group has a live member (killpg(0) also succeeds for a group of zombies)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
    return False


_LISTEN = "0A"  # the TCP state column of /proc/net/tcp: LISTEN


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port` (IPv4 and IPv6) on this machine."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                next(fh, None)  # the header
                for line in fh:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == _LISTEN and fields[1].rpartition(":")[2] == f"{port:04X}":
                        inodes.add(fields[9])
        except OSError:
            continue
    return inodes


def port_listener(port: int) -> tuple[int | None, str] | None:
    """The process that listens on TCP `port` here: (pid, its command line); (None, "") when a socket
    listens but its owner cannot be seen (another user's process); None when nothing listens."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd.path) for fd in os.scandir(f"/proc/{entry.name}/fd")}
        except OSError:  # gone, or another user's: its descriptors cannot be read
            continue
        if links & inodes:
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
            except OSError:
                argv = []
            return int(entry.name), " ".join(a.decode("utf-8", "replace") for a in argv if a)
    return None, ""
