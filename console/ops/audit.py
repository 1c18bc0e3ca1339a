"""The audit log: every switch, its outcome and timings, in SQLite (WAL) in the state dir.

A switch is written twice: once when it starts (outcome "started") and once when it ends. A console killed
mid-switch leaves the "started" row behind; the next console to open the log marks it "interrupted",
unless the console that wrote it still runs.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.hosts.procfs import pid_alive
from console.ops.state_db import StateDb, db_faults

AUDIT_FILE = "audit.sqlite3"
STARTED = "started"
INTERRUPTED = "interrupted"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS switches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    host TEXT NOT NULL,
    service TEXT NOT NULL,
    from_layout TEXT,
    to_layout TEXT NOT NULL,
    forced INTEGER NOT NULL DEFAULT 0,
    rollback_of INTEGER,
    outcome TEXT NOT NULL,
    reason TEXT,
    failure_json TEXT,
    fit_verdict TEXT,
    detected_after_s REAL,
    elapsed_s REAL,
    console_pid INTEGER,
    console_host TEXT
);
CREATE INDEX IF NOT EXISTS switches_service ON switches (host, service, id);
"""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One switch as the log holds it."""

    id: int
    started_at: float
    finished_at: float | None
    host: str
    service: str
    from_layout: str | None
    to_layout: str
    forced: bool
    rollback_of: int | None
    outcome: str
    reason: str | None
    failure: dict[str, Any] | None
    fit_verdict: str | None
    detected_after_s: float | None
    elapsed_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"event": "switch", **{k: getattr(self, k) for k in self.__slots__}}


class AuditLog(StateDb):
    """The switch log of one state dir. Opening it marks switches of dead consoles interrupted.

    The file is created 0600: it names hosts, layouts and failures (with their log lines).
    """

    schema = _SCHEMA

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.interrupted_on_open = self.mark_interrupted()

    def begin(
        self,
        *,
        host: str,
        service: str,
        to_layout: str,
        from_layout: str | None = None,
        forced: bool = False,
        rollback_of: int | None = None,
        fit_verdict: str | None = None,
    ) -> int:
        """Record a switch as started; return its id."""
        cur = self._execute(
            "INSERT INTO switches (started_at, host, service, from_layout, to_layout, forced, rollback_of,"
            " outcome, fit_verdict, console_pid, console_host) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                time.time(),
                host,
                service,
                from_layout,
                to_layout,
                int(forced),
                rollback_of,
                STARTED,
                fit_verdict,
                os.getpid(),
                socket.gethostname(),
            ),
        )
        return int(cur.lastrowid or 0)

    def finish(
        self,
        entry_id: int,
        *,
        outcome: str,
        reason: str | None = None,
        failure: dict[str, Any] | None = None,
        detected_after_s: float | None = None,
        elapsed_s: float | None = None,
    ) -> None:
        """Record how a started switch ended."""
        self._execute(
            "UPDATE switches SET finished_at=?, outcome=?, reason=?, failure_json=?, detected_after_s=?,"
            " elapsed_s=? WHERE id=?",
            (
                time.time(),
                outcome,
                reason,
                json.dumps(failure) if failure is not None else None,
                detected_after_s,
                elapsed_s,
                entry_id,
            ),
        )

    def mark_interrupted(self) -> int:
        """Mark "started" switches whose console is gone as interrupted; return how many."""
        me = socket.gethostname()
        rows = self._execute(
            "SELECT id, console_pid, console_host FROM switches WHERE outcome=?", (STARTED,)
        ).fetchall()
        dead = [
            row_id for row_id, pid, host in rows if host == me and pid != os.getpid() and not pid_alive(pid)
        ]
        for row_id in dead:
            self._execute(
                "UPDATE switches SET outcome=?, finished_at=?, reason=? WHERE id=? AND outcome=?",
                (INTERRUPTED, time.time(), "the console stopped before the switch ended", row_id, STARTED),
            )
        return len(dead)

    def entries(self, *, limit: int | None = None, host: str | None = None) -> list[AuditEntry]:
        """Switches, oldest first (the newest `limit` of them)."""
        sql = "SELECT * FROM switches"
        params: list[Any] = []
        if host is not None:
            sql += " WHERE host=?"
            params.append(host)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with db_faults(self.path):
            cur = self._db.execute(sql, params)
            rows = cur.fetchall()
        names = [d[0] for d in cur.description]
        return [_entry(dict(zip(names, row, strict=True))) for row in reversed(rows)]

    def get(self, entry_id: int) -> AuditEntry | None:
        with db_faults(self.path):
            cur = self._db.execute("SELECT * FROM switches WHERE id=?", (entry_id,))
            row = cur.fetchone()
        return _entry(dict(zip([d[0] for d in cur.description], row, strict=True))) if row else None

    def last_ready_layout(self, host: str, service: str, *, exclude: str | None = None) -> str | None:
        """The layout of the newest switch of this service that ended ready (other than `exclude`)."""
        row = self._execute(
            "SELECT to_layout FROM switches WHERE host=? AND service=? AND outcome='ready'"
            " AND (? IS NULL OR to_layout != ?) ORDER BY id DESC LIMIT 1",
            (host, service, exclude, exclude),
        ).fetchone()
        return row[0] if row else None

    def last_started_layout(self, host: str, service: str) -> str | None:
        """The layout the newest switch of this service started (whatever its outcome)."""
        row = self._execute(
            "SELECT to_layout FROM switches WHERE host=? AND service=? AND outcome != 'refused'"
            " ORDER BY id DESC LIMIT 1",
            (host, service),
        ).fetchone()
        return row[0] if row else None


def _entry(row: dict[str, Any]) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        host=row["host"],
        service=row["service"],
        from_layout=row["from_layout"],
        to_layout=row["to_layout"],
        forced=bool(row["forced"]),
        rollback_of=row["rollback_of"],
        outcome=row["outcome"],
        reason=row["reason"],
        failure=json.loads(row["failure_json"]) if row["failure_json"] else None,
        fit_verdict=row["fit_verdict"],
        detected_after_s=row["detected_after_s"],
        elapsed_s=row["elapsed_s"],
    )


def open_audit(state_root: Path | None = None) -> AuditLog:
    """The audit log of the state dir (the default one when `state_root` is None), both checked.

    Raises:
        StateDirError: the state dir cannot be used (one line: which, and what to do).
        AuditError: the log is damaged or cannot be written (one line: which file, and what to do).
    """
    from console.hosts.state_dir import check_state_dir, state_dir

    root = check_state_dir(state_root, own=False) if state_root is not None else state_dir()
    return AuditLog(root / AUDIT_FILE)
