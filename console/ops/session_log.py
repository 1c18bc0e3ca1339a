"""The web sessions of `serve-console web`, a table of the console's state file beside the switches.

Each browser session is one row: who (the remote address as the server saw it, the browser's user
agent), when it started and ended, whether it was read-only, and how it ended. A session the server
refused (too many open) is a row too. A row left open by a server that was killed is marked
interrupted by the next one to open the table.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.hosts.procfs import pid_alive
from console.ops.audit import AUDIT_FILE
from console.ops.state_db import StateDb, db_faults

OPEN = "open"
CLOSED = "closed"
IDLE = "idle"
REFUSED = "refused"
SERVER_STOPPED = "server stopped"
INTERRUPTED = "interrupted"

#: A user agent is the browser's own text: kept short, shown through `shown()`.
USER_AGENT_CHARS = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS web_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    ended_at REAL,
    remote TEXT NOT NULL,
    user_agent TEXT,
    readonly INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT,
    app_pid INTEGER,
    server_pid INTEGER,
    server_host TEXT
);
"""


@dataclass(frozen=True, slots=True)
class WebSession:
    """One browser session as the table holds it."""

    id: int
    started_at: float
    ended_at: float | None
    remote: str
    user_agent: str | None
    readonly: bool
    outcome: str
    reason: str | None
    app_pid: int | None

    def to_json(self) -> dict[str, Any]:
        return {"event": "web_session", **{k: getattr(self, k) for k in self.__slots__}}


class WebSessionLog(StateDb):
    """The web_sessions table of one state file. Opening it marks rows of dead servers interrupted."""

    schema = _SCHEMA

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._mark_interrupted()

    def begin(self, *, remote: str, user_agent: str | None, readonly: bool) -> int:
        """Record a session as open; return its id."""
        cur = self._execute(
            "INSERT INTO web_sessions (started_at, remote, user_agent, readonly, outcome, server_pid, server_host)"
            " VALUES (?,?,?,?,?,?,?)",
            (time.time(), remote, (user_agent or "")[:USER_AGENT_CHARS] or None, int(readonly), OPEN,
             os.getpid(), socket.gethostname()),
        )
        return int(cur.lastrowid or 0)

    def started(self, session_id: int, app_pid: int | None) -> None:
        """Record the pid of the session's app process."""
        self._execute("UPDATE web_sessions SET app_pid=? WHERE id=?", (app_pid, session_id))

    def end(self, session_id: int, outcome: str, reason: str | None = None) -> None:
        """Record how a session ended (once: a later call leaves the first ending)."""
        self._execute("UPDATE web_sessions SET ended_at=?, outcome=?, reason=? WHERE id=? AND outcome=?",
                      (time.time(), outcome, reason, session_id, OPEN))

    def refused(self, *, remote: str, user_agent: str | None, readonly: bool, reason: str) -> None:
        """Record a session the server did not start."""
        self.end(self.begin(remote=remote, user_agent=user_agent, readonly=readonly), REFUSED, reason)

    def sessions(self, *, limit: int | None = None) -> list[WebSession]:
        """Sessions, oldest first (the newest `limit` of them)."""
        sql = "SELECT id, started_at, ended_at, remote, user_agent, readonly, outcome, reason, app_pid" \
              " FROM web_sessions ORDER BY id DESC"
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        with db_faults(self.path):
            rows = self._db.execute(sql, params).fetchall()
        return [WebSession(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7], r[8]) for r in reversed(rows)]

    def _mark_interrupted(self) -> None:
        me = socket.gethostname()
        rows = self._execute("SELECT id, server_pid, server_host FROM web_sessions WHERE outcome=?",
                             (OPEN,)).fetchall()
        for row_id, pid, host in rows:
            if host == me and pid != os.getpid() and not pid_alive(pid):
                self._execute("UPDATE web_sessions SET outcome=?, reason=? WHERE id=? AND outcome=?",
                              (INTERRUPTED, "the web server stopped without closing it", row_id, OPEN))


def open_web_sessions(state_root: Path | None = None) -> WebSessionLog:
    """The web session table of the state dir (the default one when `state_root` is None), both checked.

    Raises:
        StateDirError: the state dir cannot be used (one line: which, and what to do).
        AuditError: the file is damaged or cannot be written (one line: which file, and what to do).
    """
    from console.hosts.state_dir import check_state_dir, state_dir

    root = check_state_dir(state_root, own=False) if state_root is not None else state_dir()
    return WebSessionLog(root / AUDIT_FILE)
