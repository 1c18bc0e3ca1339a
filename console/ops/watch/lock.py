"""One watch daemon per state file: a lock beside it, held for the daemon's life, naming its pid.

Two daemons on one state file would store every incident twice and deliver every alert twice. The lock
is `flock(2)` on `<state file>.watch.lock` (released by the kernel when the process ends, even by -9,
so a crash never leaves it held); the file holds the holder's pid for the second daemon's refusal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from console.errors import ConsoleError


class WatchLocked(ConsoleError):
    """Another daemon watches with this state file (one line naming its pid; exit 1)."""


class WatchLock:
    """The lock of one state file, taken at construction; `release()` (or the process's end) lets it go.

    Raises:
        WatchLocked: another process holds it.
        OSError: the lock file cannot be opened (the state dir's own fault, said by the caller).
    """

    def __init__(self, state_file: Path) -> None:
        self.path = state_file.with_name(state_file.name + ".watch.lock")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise WatchLocked(f"another serve-console watch ({who}) already watches with the state file "
                              f"{state_file}; stop it first, or give this one its own SERVE_CONSOLE_STATE_DIR"
                              ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip() or "0") or None
    return None
