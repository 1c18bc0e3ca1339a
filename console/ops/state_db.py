"""The console's own SQLite file in the state dir: opened private, in WAL, its faults as one line.

The audit log (switches), the probe and explore results and the watch daemon's alerts are tables of this
one file. Each reader or writer holds a connection of its own; WAL lets a console read while another
writes, and the busy timeout lets two writers take turns.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from console.errors import ConsoleError

BUSY_TIMEOUT_S = 10.0


class AuditError(ConsoleError):
    """The audit log cannot be read or written; one line naming the file and what to do (exit 1)."""


@contextlib.contextmanager
def db_faults(path: Path) -> Iterator[None]:
    """SQLite's and the file system's errors as one AuditError line naming the file and the remedy.

    A damaged log is never moved aside by the console: it is the record of who switched what, and the
    rollback target comes from it. The operator moves it (the line says how); the next command then
    starts a new, empty log.
    """
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "full" in text:
            raise AuditError(f"audit log {path}: the disk is full; free space, then run the command again") from None
        if "readonly" in text or "unable to open" in text or "disk I/O" in text:
            raise AuditError(
                f"audit log {path}: cannot write it ({text}); make it and its directory writable for this "
                f"user, or point SERVE_CONSOLE_STATE_DIR at another directory"
            ) from None
        raise AuditError(f"audit log {path}: {text}") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        raise AuditError(
            f"audit log {path} is damaged ({exc}); move it aside (mv {path} {path}.damaged) and the "
            "console starts a new one"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise AuditError(f"audit log {path}: the disk is full; free space, then run the command again") from None
        raise AuditError(f"audit log {path}: {exc.strerror or exc}") from None


class StateDb:
    """One connection to the state file; a subclass names its tables in `schema`."""

    schema = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        with db_faults(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            _private_file(path)
            self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
            try:
                self._enter_wal()
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(self.schema)
            except BaseException:
                self._db.close()
                raise

    def _enter_wal(self) -> None:
        """Switch to WAL; two consoles creating the log at once can get SQLITE_BUSY here without the
        busy timeout applying (a journal-mode change takes an exclusive lock), so retry briefly."""
        for attempt in range(50):
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self._db.close()

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with db_faults(self.path):
            return self._db.execute(sql, params)


def _private_file(path: Path) -> None:
    """Create the log 0600, or tighten an existing one this user owns.

    An existing file is never opened here: closing any descriptor of a file drops every POSIX lock this
    process holds on it, SQLite's included. A second table of the same file opened in one process (the
    TUI's audit log and results, the web server's sessions and its demo's audit) then left the first
    connection without its WAL lock, another process closing its connection deleted the WAL, and the
    first connection's later writes went to the deleted file: never seen by any other process.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        info = os.stat(path)
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.chmod(path, 0o600)
        return
    os.close(fd)  # a new file: no connection of this process holds a lock on it yet
