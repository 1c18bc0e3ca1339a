"""Probe results and explore progress, in tables beside the audit log (the same SQLite file, WAL).

- `probe_results`: one row per probe level: host, service, layout, engine, model, the probe's parameters,
  its figures (the `probe --json` line) and when.
- `explores`: one row per explore: its parameters, the layout it started from, its state
  (running, done, interrupted) and the best layout it found.
- `explore_layouts`: each layout's outcome within an explore (measured, skipped, failed, timeout),
  with its fit and failure; `explore --resume` goes on after the last one recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.ops.state_db import StateDb

if TYPE_CHECKING:
    from console.ops.audit import AuditLog
    from console.ops.explore.probe_load import ProbeOptions
    from console.ops.explore.probe_metrics import ProbeResult

RUNNING, DONE, INTERRUPTED = "running", "done", "interrupted"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS probe_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    taken_at REAL NOT NULL,
    host TEXT NOT NULL,
    service TEXT NOT NULL,
    layout TEXT,
    engine TEXT,
    model TEXT,
    concurrency INTEGER,
    request_rate REAL,
    params_json TEXT NOT NULL,
    result_json TEXT NOT NULL,
    explore_id INTEGER
);
CREATE INDEX IF NOT EXISTS probe_results_service ON probe_results (host, service, id);
CREATE TABLE IF NOT EXISTS explores (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    host TEXT NOT NULL,
    service TEXT NOT NULL,
    params_json TEXT NOT NULL,
    start_layout TEXT,
    state TEXT NOT NULL,
    best TEXT,
    left_running TEXT
);
CREATE TABLE IF NOT EXISTS explore_layouts (
    explore_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    layout TEXT NOT NULL,
    outcome TEXT NOT NULL,
    fit_json TEXT,
    failure_json TEXT,
    finished_at REAL NOT NULL,
    PRIMARY KEY (explore_id, position)
);
"""


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True, slots=True)
class StoredProbe:
    """One stored probe level."""

    id: int
    taken_at: float
    host: str
    service: str
    layout: str | None
    params: dict[str, Any]
    result: dict[str, Any]
    """The `probe --json` line."""
    explore_id: int | None


@dataclass(frozen=True, slots=True)
class LayoutOutcome:
    """How one layout of an explore ended."""

    layout: str
    outcome: str
    fit: dict[str, Any] | None
    failure: dict[str, Any] | None
    finished_at: float


@dataclass(frozen=True, slots=True)
class ExploreRecord:
    """One explore as stored."""

    id: int
    started_at: float
    host: str
    service: str
    params: dict[str, Any]
    start_layout: str | None
    state: str
    best: str | None
    left_running: str | None


class ResultsStore(StateDb):
    """The results tables of one audit DB, over a connection of their own."""

    schema = _SCHEMA

    @classmethod
    def beside(cls, audit: AuditLog) -> ResultsStore:
        """The store in the audit log's own file."""
        return cls(audit.path)

    def add_probe(self, result: ProbeResult, options: ProbeOptions, *, explore_id: int | None = None) -> int:
        s = result.summary
        cur = self._execute(
            "INSERT INTO probe_results (taken_at, host, service, layout, engine, model, concurrency,"
            " request_rate, params_json, result_json, explore_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (result.taken_at, result.host, result.service, result.layout, result.engine, result.model,
             s.concurrency, s.request_rate, json.dumps(options.to_json()), json.dumps(result.to_json()),
             explore_id),
        )  # fmt: skip
        return int(cur.lastrowid or 0)

    def probes(self, *, host: str | None = None, service: str | None = None,
               explore_id: int | None = None) -> list[StoredProbe]:
        """Stored probe levels, oldest first."""
        sql, params = "SELECT * FROM probe_results WHERE 1=1", []
        for column, value in (("host", host), ("service", service), ("explore_id", explore_id)):
            if value is not None:
                sql += f" AND {column}=?"
                params.append(value)
        cur = self._execute(sql + " ORDER BY id", params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return [StoredProbe(r["id"], r["taken_at"], r["host"], r["service"], r["layout"],
                            json.loads(r["params_json"]), json.loads(r["result_json"]), r["explore_id"])
                for r in rows]  # fmt: skip

    # -- explores ---------------------------------------------------------------------------------
    def begin_explore(self, host: str, service: str, params: dict[str, Any], start_layout: str | None) -> int:
        cur = self._execute(
            "INSERT INTO explores (started_at, host, service, params_json, start_layout, state)"
            " VALUES (?,?,?,?,?,?)",
            (time.time(), host, service, json.dumps(params), start_layout, RUNNING),
        )
        return int(cur.lastrowid or 0)

    def set_explore_state(self, explore_id: int, state: str, *, best: str | None = None,
                          left_running: str | None = None) -> None:
        self._execute(
            "UPDATE explores SET state=?, best=?, left_running=?, finished_at=? WHERE id=?",
            (state, best, left_running, None if state == RUNNING else time.time(), explore_id),
        )

    def record_outcome(self, explore_id: int, position: int, outcome: LayoutOutcome) -> None:
        self._execute(
            "INSERT OR REPLACE INTO explore_layouts (explore_id, position, layout, outcome, fit_json,"
            " failure_json, finished_at) VALUES (?,?,?,?,?,?,?)",
            (explore_id, position, outcome.layout, outcome.outcome, _dumps(outcome.fit),
             _dumps(outcome.failure), outcome.finished_at),
        )  # fmt: skip

    def outcomes(self, explore_id: int) -> dict[int, LayoutOutcome]:
        """The outcomes recorded so far, by position in the explore's layout list."""
        rows = self._execute(
            "SELECT position, layout, outcome, fit_json, failure_json, finished_at FROM explore_layouts"
            " WHERE explore_id=? ORDER BY position", (explore_id,),
        ).fetchall()  # fmt: skip
        return {pos: LayoutOutcome(layout, outcome, _loads(fit), _loads(failure), at)
                for pos, layout, outcome, fit, failure, at in rows}  # fmt: skip

    def latest_outcomes(self, host: str, service: str) -> dict[str, LayoutOutcome]:
        """Each layout's newest explore outcome on this service."""
        rows = self._execute(
            "SELECT l.layout, l.outcome, l.fit_json, l.failure_json, l.finished_at FROM explore_layouts l"
            " JOIN explores e ON e.id = l.explore_id WHERE e.host=? AND e.service=? ORDER BY l.finished_at",
            (host, service),
        ).fetchall()  # fmt: skip
        return {layout: LayoutOutcome(layout, outcome, _loads(fit), _loads(failure), at)
                for layout, outcome, fit, failure, at in rows}  # fmt: skip

    def explore(self, explore_id: int) -> ExploreRecord | None:
        cur = self._execute("SELECT * FROM explores WHERE id=?", (explore_id,))
        row = cur.fetchone()
        return _explore(dict(zip([d[0] for d in cur.description], row, strict=True))) if row else None

    def unfinished_explore(self, host: str, service: str) -> ExploreRecord | None:
        """The newest explore of this service that did not finish (interrupted, or its console died)."""
        cur = self._execute(
            "SELECT * FROM explores WHERE host=? AND service=? ORDER BY id DESC LIMIT 1", (host, service)
        )
        row = cur.fetchone()
        if row is None:
            return None
        record = _explore(dict(zip([d[0] for d in cur.description], row, strict=True)))
        return record if record.state != DONE else None


def _explore(row: dict[str, Any]) -> ExploreRecord:
    return ExploreRecord(row["id"], row["started_at"], row["host"], row["service"],
                         json.loads(row["params_json"]), row["start_layout"], row["state"], row["best"],
                         row["left_running"])  # fmt: skip
