"""Probe results and explore progress, in tables beside the audit log (the same SQLite file, WAL).

- `probe_results`: one row per probe level: host, service, layout, engine, model, the probe's parameters,
  its figures (the `probe --json` line) and when.
- `explores`: one row per explore: its parameters, the layout it started from, its state
  (running, done, interrupted) and the best layout it found.
- `explore_layouts`: each layout's outcome within an explore (measured, skipped, pruned, failed,
  timeout), with its fit and failure; `explore --resume` goes on after the last one recorded.
- `perf_receipts`: each measured (layout, concurrency) beside what the performance model predicted for
  it just before (docs/predict.md): the prediction, the measurement, the error, the host's fingerprint.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from console.errors import UsageError
from console.ops.state_db import AuditError, StateDb, db_faults

if TYPE_CHECKING:
    from console.ops.audit import AuditLog
    from console.ops.explore.probe_load import ProbeOptions
    from console.ops.explore.probe_metrics import ProbeResult

RUNNING, DONE, INTERRUPTED = "running", "done", "interrupted"
T = TypeVar("T")
#: Seconds to wait before each new try of a write that found the file locked past its busy timeout
#: (another console writing a long transaction): the level was printed already, so waiting costs little.
WRITE_RETRY_WAITS_S = (1.0, 2.0)

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
CREATE TABLE IF NOT EXISTS perf_receipts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    taken_at REAL NOT NULL,
    host TEXT NOT NULL,
    service TEXT NOT NULL,
    layout TEXT NOT NULL,
    concurrency INTEGER,
    predicted_json TEXT NOT NULL,
    measured_json TEXT NOT NULL,
    tpot_error REAL,
    output_tok_s_error REAL,
    fingerprint_json TEXT NOT NULL,
    explore_id INTEGER
);
"""


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


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
class PerfReceipt:
    """A measured (layout, concurrency) beside its prediction; errors are predicted / measured - 1."""

    taken_at: float
    host: str
    service: str
    layout: str
    concurrency: int | None
    predicted: dict[str, Any]
    """The SpeedPrediction's JSON, made before the layout was measured."""
    measured: dict[str, Any]
    """`tpot_ms`, `output_tok_s`, `per_request_tok_s`, `ttft_ms` as the probe measured them."""
    tpot_error: float | None
    output_tok_s_error: float | None
    fingerprint: dict[str, Any]
    explore_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"taken_at": round(self.taken_at, 3), "host": self.host, "service": self.service,
                "layout": self.layout, "concurrency": self.concurrency, "predicted": self.predicted,
                "measured": self.measured, "tpot_error": self.tpot_error,
                "output_tok_s_error": self.output_tok_s_error, "fingerprint": self.fingerprint,
                "explore_id": self.explore_id}  # fmt: skip


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
    """The results tables of one audit DB, over a connection of their own.

    A write that finds the file locked is tried again (WRITE_RETRY_WAITS_S), then fails in one line; a
    row that cannot be read back is one line naming it and how to remove it, never a traceback.
    """

    schema = _SCHEMA

    @classmethod
    def beside(cls, audit: AuditLog) -> ResultsStore:
        """The store in the audit log's own file."""
        return cls(audit.path)

    def _write(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        """One write, tried again while another writer holds the file past the busy timeout."""
        waits = list(WRITE_RETRY_WAITS_S)
        while True:
            try:
                return self._db.execute(sql, params)
            except sqlite3.Error as exc:
                if not (isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)):
                    with db_faults(self.path):  # a full disk, a damaged file: its one line
                        raise
                if not waits:
                    tries = 1 + len(WRITE_RETRY_WAITS_S)
                    raise AuditError(f"results store {self.path}: still locked by another writer after "
                                     f"{tries} tries; this result was not stored") from None
                time.sleep(waits.pop(0))

    def _fault(self, table: str, key: str, column: str, why: str) -> AuditError:
        return AuditError(f"results store {self.path}: {table} row {key}: {column} is damaged ({why}); "
                          f"delete that row (sqlite3 {self.path} 'DELETE FROM {table} WHERE {key}')")

    def _object(self, table: str, key: str, column: str, text: Any, *, optional: bool = False) -> Any:
        """A JSON column as a dict (None for NULL when `optional`); anything else is that row's fault."""
        if text is None and optional:
            return None
        try:
            value = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise self._fault(table, key, column, "not JSON") from None
        if not isinstance(value, dict):
            raise self._fault(table, key, column, "not a JSON object")
        return value

    def _checked(self, table: str, key: str, row: dict[str, Any], numbers: Sequence[str],
                 texts: Sequence[str]) -> dict[str, Any]:
        """The row, once its number and text columns hold what they should (SQLite stores any type)."""
        for column in numbers:
            if not isinstance(row[column], int | float):
                raise self._fault(table, key, column, "not a number")
        for column in texts:
            if row[column] is not None and not isinstance(row[column], str):
                raise self._fault(table, key, column, "not text")
        return row

    def add_probe(self, result: ProbeResult, options: ProbeOptions, *, explore_id: int | None = None) -> int:
        s = result.summary
        cur = self._write(
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
        out = []
        for row in cur.fetchall():
            r = dict(zip(names, row, strict=True))
            key = f"id={r['id']}"
            self._checked("probe_results", key, r, ("taken_at",), ("host", "service", "layout"))
            out.append(StoredProbe(r["id"], r["taken_at"], r["host"], r["service"], r["layout"],
                                   self._object("probe_results", key, "params_json", r["params_json"]),
                                   self._object("probe_results", key, "result_json", r["result_json"]),
                                   r["explore_id"]))  # fmt: skip
        return out

    # -- receipts of the performance model --------------------------------------------------------
    def add_receipt(self, receipt: PerfReceipt) -> int:
        cur = self._write(
            "INSERT INTO perf_receipts (taken_at, host, service, layout, concurrency, predicted_json,"
            " measured_json, tpot_error, output_tok_s_error, fingerprint_json, explore_id)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (receipt.taken_at, receipt.host, receipt.service, receipt.layout, receipt.concurrency,
             json.dumps(receipt.predicted), json.dumps(receipt.measured), receipt.tpot_error,
             receipt.output_tok_s_error, json.dumps(receipt.fingerprint), receipt.explore_id),
        )  # fmt: skip
        return int(cur.lastrowid or 0)

    def receipts(self, *, host: str, service: str) -> list[PerfReceipt]:
        """The service's receipts, oldest first."""
        cur = self._execute("SELECT * FROM perf_receipts WHERE host=? AND service=? ORDER BY id", (host, service))
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            r = dict(zip(names, row, strict=True))
            key = f"id={r['id']}"
            self._checked("perf_receipts", key, r, ("taken_at",), ("host", "service", "layout"))
            out.append(PerfReceipt(
                r["taken_at"], r["host"], r["service"], r["layout"], r["concurrency"],
                self._object("perf_receipts", key, "predicted_json", r["predicted_json"]),
                self._object("perf_receipts", key, "measured_json", r["measured_json"]),
                r["tpot_error"], r["output_tok_s_error"],
                self._object("perf_receipts", key, "fingerprint_json", r["fingerprint_json"]), r["explore_id"]))  # fmt: skip
        return out

    # -- explores ---------------------------------------------------------------------------------
    def begin_explore(self, host: str, service: str, params: dict[str, Any], start_layout: str | None) -> int:
        cur = self._write(
            "INSERT INTO explores (started_at, host, service, params_json, start_layout, state)"
            " VALUES (?,?,?,?,?,?)",
            (time.time(), host, service, json.dumps(params), start_layout, RUNNING),
        )
        return int(cur.lastrowid or 0)

    def set_explore_state(self, explore_id: int, state: str, *, best: str | None = None,
                          left_running: str | None = None) -> None:
        self._write(
            "UPDATE explores SET state=?, best=?, left_running=?, finished_at=? WHERE id=?",
            (state, best, left_running, None if state == RUNNING else time.time(), explore_id),
        )

    def record_outcome(self, explore_id: int, position: int, outcome: LayoutOutcome) -> None:
        self._write(
            "INSERT OR REPLACE INTO explore_layouts (explore_id, position, layout, outcome, fit_json,"
            " failure_json, finished_at) VALUES (?,?,?,?,?,?,?)",
            (explore_id, position, outcome.layout, outcome.outcome, _dumps(outcome.fit),
             _dumps(outcome.failure), outcome.finished_at),
        )  # fmt: skip

    def _outcome(self, explore_id: Any, position: Any, layout: Any, outcome: Any, fit: Any, failure: Any,
                 finished_at: Any) -> LayoutOutcome:
        key = f"explore_id={explore_id} AND position={position}"
        row = {"layout": layout, "outcome": outcome, "finished_at": finished_at}
        self._checked("explore_layouts", key, row, ("finished_at",), ("layout", "outcome"))
        fit_doc = self._object("explore_layouts", key, "fit_json", fit, optional=True)
        failure_doc = self._object("explore_layouts", key, "failure_json", failure, optional=True)
        return LayoutOutcome(layout, outcome, fit_doc, failure_doc, finished_at)

    def outcomes(self, explore_id: int) -> dict[int, LayoutOutcome]:
        """The outcomes recorded so far, by position in the explore's layout list."""
        rows = self._execute(
            "SELECT explore_id, position, layout, outcome, fit_json, failure_json, finished_at"
            " FROM explore_layouts WHERE explore_id=? ORDER BY position", (explore_id,),
        ).fetchall()  # fmt: skip
        return {row[1]: self._outcome(*row) for row in rows}

    def latest_outcomes(self, host: str, service: str) -> dict[str, LayoutOutcome]:
        """Each layout's newest explore outcome on this service."""
        rows = self._execute(
            "SELECT l.explore_id, l.position, l.layout, l.outcome, l.fit_json, l.failure_json, l.finished_at"
            " FROM explore_layouts l JOIN explores e ON e.id = l.explore_id WHERE e.host=? AND e.service=?"
            " ORDER BY l.finished_at", (host, service),
        ).fetchall()  # fmt: skip
        return {row[2]: self._outcome(*row) for row in rows}

    def _explore(self, cur: sqlite3.Cursor, row: tuple[Any, ...]) -> ExploreRecord:
        r = dict(zip([d[0] for d in cur.description], row, strict=True))
        key = f"id={r['id']}"
        self._checked("explores", key, r, ("started_at",), ("start_layout", "state", "best", "left_running"))
        params = self._object("explores", key, "params_json", r["params_json"])
        return ExploreRecord(r["id"], r["started_at"], r["host"], r["service"], params, r["start_layout"],
                             r["state"], r["best"], r["left_running"])  # fmt: skip

    def explore_params(self, record: ExploreRecord, parse: Callable[[dict[str, Any]], T]) -> T:
        """An explore's stored parameters read by `parse` (ExploreOptions.from_json, for --resume).

        Raises:
            AuditError: they cannot be read; the line names the row.
        """
        try:
            return parse(record.params)
        except (KeyError, TypeError, ValueError, AttributeError, UsageError) as exc:
            why = f"its parameters cannot be read: {type(exc).__name__} {str(exc)[:80]}"
            raise self._fault("explores", f"id={record.id}", "params_json", why) from None

    def explore(self, explore_id: int) -> ExploreRecord | None:
        cur = self._execute("SELECT * FROM explores WHERE id=?", (explore_id,))
        row = cur.fetchone()
        return self._explore(cur, row) if row else None

    def unfinished_explore(self, host: str, service: str) -> ExploreRecord | None:
        """The newest explore of this service that did not finish (interrupted, or its console died)."""
        cur = self._execute(
            "SELECT * FROM explores WHERE host=? AND service=? ORDER BY id DESC LIMIT 1", (host, service)
        )
        row = cur.fetchone()
        if row is None:
            return None
        record = self._explore(cur, row)
        return record if record.state != DONE else None
