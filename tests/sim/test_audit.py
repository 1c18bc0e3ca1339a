"""The audit log: switches with outcomes and timings, interrupted ones marked by the next console."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

from console.ops.audit import INTERRUPTED, AuditLog


def test_switch_is_recorded_with_outcome_and_timings(tmp_path):
    log = AuditLog(tmp_path / "audit.sqlite3")
    entry_id = log.begin(
        host="demo", service="k26", to_layout="TP4 EP2", from_layout="EP8", forced=True, fit_verdict="oom"
    )
    assert log.get(entry_id).outcome == "started"
    failure = {"kind": "cuda_oom", "gpu": 2, "tried_bytes": 704643072}
    log.finish(
        entry_id, outcome="failed", reason="CUDA OOM", failure=failure, detected_after_s=0.04, elapsed_s=3.5
    )
    back = log.begin(host="demo", service="k26", to_layout="EP8", from_layout="TP4 EP2", rollback_of=entry_id)
    log.finish(back, outcome="ready", detected_after_s=0.02, elapsed_s=9.0)
    entries = log.entries()
    assert [e.outcome for e in entries] == ["failed", "ready"]
    assert entries[0].failure == failure and entries[0].forced and entries[0].fit_verdict == "oom"
    assert entries[1].rollback_of == entry_id and entries[1].elapsed_s == 9.0
    assert entries[0].to_json()["event"] == "switch"
    assert log.last_ready_layout("demo", "k26") == "EP8"
    assert log.last_ready_layout("demo", "k26", exclude="EP8") is None
    assert log.last_ready_layout("demo", "other") is None
    log.close()


def test_log_is_sqlite_in_wal_mode(tmp_path):
    AuditLog(tmp_path / "a.sqlite3").close()
    mode = sqlite3.connect(tmp_path / "a.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_kill_9_mid_switch_keeps_the_started_entry_and_the_next_open_marks_it_interrupted(tmp_path):
    path = tmp_path / "audit.sqlite3"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from console.ops.audit import AuditLog
        log = AuditLog(Path({str(path)!r}))
        log.begin(host="demo", service="k26", to_layout="EP8")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=30)
    assert proc.returncode == -9
    log = AuditLog(path)
    assert log.interrupted_on_open == 1
    [entry] = log.entries()
    assert entry.outcome == INTERRUPTED and entry.finished_at is not None
    log.close()


def test_a_live_consoles_switch_is_not_marked_interrupted(tmp_path):
    path = tmp_path / "audit.sqlite3"
    mine = AuditLog(path)
    entry_id = mine.begin(host="demo", service="k26", to_layout="EP8")
    other = AuditLog(path)  # a second console in this (live) process
    assert other.interrupted_on_open == 0
    assert other.get(entry_id).outcome == "started"
    mine.close()
    other.close()
    assert os.path.exists(path)


def test_history_limit_and_host_filter(tmp_path):
    log = AuditLog(tmp_path / "audit.sqlite3")
    for i in range(5):
        log.finish(log.begin(host=f"h{i % 2}", service="s", to_layout=f"L{i}"), outcome="ready")
    assert [e.to_layout for e in log.entries(limit=2)] == ["L3", "L4"]
    assert [e.to_layout for e in log.entries(host="h1")] == ["L1", "L3"]
    log.close()


def test_two_consoles_creating_the_log_at_once_both_open_it(tmp_path) -> None:
    import threading

    from console.ops.audit import AuditLog

    errors: list[BaseException] = []
    for i in range(20):
        path = tmp_path / f"audit-{i}.sqlite3"
        barrier = threading.Barrier(3)

        def open_log(path=path, barrier=barrier) -> None:
            barrier.wait()
            try:
                AuditLog(path).close()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=open_log) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
