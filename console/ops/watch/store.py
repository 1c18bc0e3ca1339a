"""The watch daemon's memory in the console's state file: every alert it raised, and what it still owes.

- `watch_alerts`: one row per incident: its labels and annotations, when it began and when it ended
  (null while it fires). The daemon reloads the firing ones when it starts, so the same incident never
  raises a second alert; `serve-console alerts` and the TUI's alerts screen read them.
- `watch_outbox`: the deliveries not yet made, per destination, in order. A destination that is down
  keeps its rows until it answers; beyond `queue_max` rows, the oldest resolved delivery is dropped first
  (then the oldest of any), and every drop is counted in `watch_counters`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.domain.alerts import FIRING, RESOLVED, UPDATED, Alert, Transition
from console.ops.state_db import StateDb, db_faults

#: Resolved incidents kept for `alerts` and the TUI; older ones are forgotten.
HISTORY_MAX = 10_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS watch_alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL,
    alertname TEXT NOT NULL,
    host TEXT NOT NULL,
    labels_json TEXT NOT NULL,
    annotations_json TEXT NOT NULL,
    starts_at REAL NOT NULL,
    ends_at REAL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS watch_alerts_firing ON watch_alerts (ends_at, fingerprint);
CREATE TABLE IF NOT EXISTS watch_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sink TEXT NOT NULL,
    status TEXT NOT NULL,
    alert_id INTEGER NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS watch_outbox_sink ON watch_outbox (sink, id);
CREATE TABLE IF NOT EXISTS watch_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One transition owed to one destination."""

    id: int
    sink: str
    status: str
    """"firing" or "resolved"."""
    alert: Alert
    attempts: int


class DamagedRow(ValueError):
    """A row of watch_alerts that does not read as an alert (its JSON cut short, a null, a wrong type)."""


def _pairs(text: Any, column: str) -> tuple[tuple[str, str], ...]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        raise DamagedRow(f"{column} is not JSON") from None
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
        raise DamagedRow(f"{column} is not a list of [name, value] pairs")
    return tuple((k, v) for k, v in value)


def _alert(row: Sequence[Any]) -> Alert:
    """One row as an alert.

    Raises:
        DamagedRow: it does not read as one (what is wrong with it).
    """
    row_id, fp, labels, annotations, starts_at, ends_at = row
    if not isinstance(fp, str) or not isinstance(starts_at, int | float) or not (
            ends_at is None or isinstance(ends_at, int | float)):
        raise DamagedRow("fingerprint, starts_at or ends_at of the wrong type")
    return Alert(fp, _pairs(labels, "labels_json"), _pairs(annotations, "annotations_json"), float(starts_at),
                 None if ends_at is None else float(ends_at), id=row_id)


_ALERT_COLUMNS = "id, fingerprint, labels_json, annotations_json, starts_at, ends_at"


class AlertStore(StateDb):
    """The alerts and the outbox of one state file.

    Args:
        path: The state file (the audit log's, `audit.sqlite3`).
        queue_max: Deliveries kept per destination.
        history_max: Resolved incidents kept.
    """

    schema = _SCHEMA

    def __init__(self, path: Path, *, queue_max: int = 10_000, history_max: int = HISTORY_MAX) -> None:
        super().__init__(path)
        self.queue_max = queue_max
        self.history_max = history_max
        self.damaged: dict[int, str] = {}
        """watch_alerts row id -> what is wrong with it: skipped by every reader, reported by the daemon."""

    def _alerts(self, rows: Sequence[Sequence[Any]]) -> list[Alert]:
        """The rows that read as alerts; each damaged one is skipped and remembered in `damaged`."""
        out = []
        for row in rows:
            try:
                out.append(_alert(row))
            except DamagedRow as exc:
                self.damaged[row[0]] = str(exc)
        return out

    def damage_lines(self) -> list[str]:
        """One line per damaged row: which, what is wrong, and that it is skipped."""
        return [f"{self.path}: watch_alerts row {row_id} is damaged ({why}); skipped (delete it with "
                f"sqlite3 {self.path} 'DELETE FROM watch_alerts WHERE id={row_id}')"
                for row_id, why in sorted(self.damaged.items())]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with db_faults(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- incidents ----------------------------------------------------------------------------------
    def record(self, transition: Transition) -> Alert:
        """Write a transition; a new incident comes back with its row id."""
        alert, now = transition.alert, time.time()
        annotations = json.dumps(alert.annotations)
        if transition.kind == FIRING or alert.id is None:
            cur = self._execute(
                "INSERT INTO watch_alerts (fingerprint, alertname, host, labels_json, annotations_json, starts_at,"
                " ends_at, updated_at) VALUES (?,?,?,?,?,?,?,?)",
                (alert.fingerprint, alert.label("alertname"), alert.label("host"), json.dumps(alert.labels),
                 annotations, alert.starts_at, alert.ends_at, now))
            return Alert(alert.fingerprint, alert.labels, alert.annotations, alert.starts_at, alert.ends_at,
                         id=int(cur.lastrowid or 0))
        if transition.kind == UPDATED:
            self._execute("UPDATE watch_alerts SET annotations_json=?, updated_at=? WHERE id=?",
                          (annotations, now, alert.id))
        elif transition.kind == RESOLVED:
            self._execute("UPDATE watch_alerts SET ends_at=?, annotations_json=?, updated_at=? WHERE id=?",
                          (alert.ends_at, annotations, now, alert.id))
            self._prune()
        return alert

    def firing(self) -> list[Alert]:
        """The incidents that fire (for the daemon's restart)."""
        with db_faults(self.path):
            rows = self._db.execute(f"SELECT {_ALERT_COLUMNS} FROM watch_alerts WHERE ends_at IS NULL"
                                    " ORDER BY id").fetchall()
        return self._alerts(rows)

    def alerts(self, *, limit: int | None = None, firing_only: bool = False, host: str | None = None) -> list[Alert]:
        """Incidents, newest first."""
        sql = f"SELECT {_ALERT_COLUMNS} FROM watch_alerts WHERE 1=1"
        params: list[Any] = []
        if firing_only:
            sql += " AND ends_at IS NULL"
        if host is not None:
            sql += " AND host=?"
            params.append(host)
        sql += " ORDER BY id DESC" + (" LIMIT ?" if limit is not None else "")
        if limit is not None:
            params.append(limit)
        with db_faults(self.path):
            rows = self._db.execute(sql, params).fetchall()
        return self._alerts(rows)

    def _prune(self) -> None:
        self._execute(
            "DELETE FROM watch_alerts WHERE ends_at IS NOT NULL AND id NOT IN (SELECT alert_id FROM watch_outbox)"
            " AND id <= (SELECT id FROM watch_alerts WHERE ends_at IS NOT NULL ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (self.history_max,))

    # -- the outbox ---------------------------------------------------------------------------------
    def enqueue(self, sinks: Sequence[str], status: str, alert: Alert) -> list[str]:
        """Owe `status` of `alert` to each destination; returns the destinations that had to drop one."""
        dropped = []
        with self._transaction():
            for sink in sinks:
                (count,) = self._db.execute("SELECT COUNT(*) FROM watch_outbox WHERE sink=?", (sink,)).fetchone()
                if count >= self.queue_max:
                    self._drop_oldest(sink)
                    dropped.append(sink)
                self._db.execute("INSERT INTO watch_outbox (sink, status, alert_id, created_at) VALUES (?,?,?,?)",
                                 (sink, status, alert.id, time.time()))
        return dropped

    def _drop_oldest(self, sink: str) -> None:
        row = (self._db.execute("SELECT id FROM watch_outbox WHERE sink=? AND status=? ORDER BY id LIMIT 1",
                                (sink, RESOLVED)).fetchone()
               or self._db.execute("SELECT id FROM watch_outbox WHERE sink=? ORDER BY id LIMIT 1", (sink,)).fetchone())
        self._db.execute("DELETE FROM watch_outbox WHERE id=?", (row[0],))
        self._db.execute("INSERT INTO watch_counters (name, value) VALUES (?, 1)"
                         " ON CONFLICT(name) DO UPDATE SET value = value + 1", (f"dropped:{sink}",))

    def pending(self, sink: str, limit: int) -> list[Delivery]:
        """The oldest deliveries owed to `sink`, in order."""
        with db_faults(self.path):
            rows = self._db.execute(
                "SELECT o.id, o.sink, o.status, o.attempts, a.id, a.fingerprint, a.labels_json, a.annotations_json,"
                " a.starts_at, a.ends_at FROM watch_outbox o JOIN watch_alerts a ON a.id = o.alert_id WHERE o.sink=? ORDER BY o.id LIMIT ?",
                (sink, limit)).fetchall()
        out = []
        for r in rows:
            try:
                out.append(Delivery(r[0], r[1], r[2], _alert(r[4:]), r[3]))
            except DamagedRow as exc:  # nothing to send: its delivery goes, counted, and the rest go on
                self.damaged[r[4]] = str(exc)
                self.rejected(Delivery(r[0], r[1], r[2], Alert("", (), (), 0.0), r[3]), why="damaged")
        return out

    def delivered(self, ids: Sequence[int]) -> None:
        with self._transaction():
            self._db.executemany("DELETE FROM watch_outbox WHERE id=?", [(i,) for i in ids])

    def attempted(self, ids: Sequence[int], error: str) -> None:
        with self._transaction():
            self._db.executemany("UPDATE watch_outbox SET attempts = attempts + 1, last_error=? WHERE id=?",
                                 [(error[:500], i) for i in ids])

    def rejected(self, delivery: Delivery, why: str = "rejected") -> None:
        """The destination refused this delivery for good (its answer says the request itself is wrong), or
        (`why="damaged"`) its incident's row does not read."""
        with self._transaction():
            self._db.execute("DELETE FROM watch_outbox WHERE id=?", (delivery.id,))
            self._db.execute("INSERT INTO watch_counters (name, value) VALUES (?, 1)"
                             " ON CONFLICT(name) DO UPDATE SET value = value + 1", (f"{why}:{delivery.sink}",))

    def queued(self, sink: str | None = None) -> int:
        with db_faults(self.path):
            if sink is None:
                return int(self._db.execute("SELECT COUNT(*) FROM watch_outbox").fetchone()[0])
            return int(self._db.execute("SELECT COUNT(*) FROM watch_outbox WHERE sink=?", (sink,)).fetchone()[0])

    def counters(self) -> dict[str, int]:
        """Drops and rejections per destination (`dropped:alertmanager http://am:9093`)."""
        with db_faults(self.path):
            return dict(self._db.execute("SELECT name, value FROM watch_counters ORDER BY name").fetchall())


def open_alert_store(path: Path | None = None, *, queue_max: int = 10_000) -> AlertStore:
    """The alert store in the state file at `path`, else in the default state dir's audit log.

    Raises:
        StateDirError: the state dir cannot be used.
        AuditError: the file is damaged or cannot be written (one line: which file, and what to do).
    """
    if path is None:
        from console.hosts.state_dir import state_dir
        from console.ops.audit import AUDIT_FILE

        path = state_dir() / AUDIT_FILE
    return AlertStore(path, queue_max=queue_max)
