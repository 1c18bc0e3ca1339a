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


def parent_pid(pid: int) -> int | None:
    """The process's parent pid, or None when it is gone."""
    fields = _stat_fields(pid)
    return stat_ppid_fields(fields)


def stat_ppid(text: str) -> int | None:
    """The parent pid in the text of a /proc/PID/stat (read over a transport), or None."""
    return stat_ppid_fields(_after_name(text))


def stat_ppid_fields(fields: list[str] | None) -> int | None:
    try:
        return int(fields[1]) if fields and len(fields) > 1 else None  # field 4 overall: the parent
    except ValueError:
        return None


def process_uid(pid: int) -> int | None:
    """The user id the process runs as (its /proc dir's owner), or None when it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def listening_inode(port: int, address: str | None = None) -> str | None:
    """The inode of a socket listening on TCP `port` here (to `address`, if given), or None: cheap to read,
    and the same for as long as that socket lives."""
    rows = _listening_rows(port, address)
    return rows[0][9] if rows else None


def listening_uid(port: int, address: str | None = None) -> int | None:
    """The owner of the socket listening on TCP `port` here (the uid column of /proc/net/tcp), or None."""
    rows = _listening_rows(port, address)
    try:
        return int(rows[0][7]) if rows else None
    except ValueError:
        return None


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


def _listening_rows(port: int, address: str | None = None) -> list[list[str]]:
    """The /proc/net/tcp(6) rows of sockets listening on TCP `port` on this machine; with `address` (an
    IPv4 address), only those that accept connections to it (bound to it, or to any address)."""
    wanted = None if address is None else {_hex_ipv4(address), "00000000", "0" * 32}
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                next(fh, None)  # the header
                for line in fh:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == _LISTEN:
                        host, _, hex_port = fields[1].rpartition(":")
                        if hex_port == f"{port:04X}" and (wanted is None or host in wanted):
                            rows.append(fields)
        except OSError:
            continue
    return rows


def _hex_ipv4(address: str) -> str:
    """An IPv4 address as /proc/net/tcp writes it (the 32-bit word in the machine's byte order)."""
    import socket
    import struct

    try:
        return f"{struct.unpack('=I', socket.inet_aton(address))[0]:08X}"
    except OSError:
        return address


def _listening_inodes(port: int, address: str | None = None) -> set[str]:
    """Socket inodes listening on TCP `port` (IPv4 and IPv6) on this machine (to `address`, if given)."""
    return {fields[9] for fields in _listening_rows(port, address)}


def port_listener(port: int, address: str | None = None) -> tuple[int | None, str] | None:
    """The process that listens on TCP `port` here (for connections to `address`, if given): (pid, its
    command line); (None, "") when a socket listens but its owner cannot be seen (another user's
    process); None when nothing listens."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port, address)}
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
