"""Two tables of the state file in one process keep SQLite's locks: another process sees every write.

Opening a second StateDb used to open and close a descriptor of the file, which drops every POSIX lock
the process holds on it: the first connection lost its WAL lock, a reader in another process that closed
deleted the WAL, and the first connection's writes went to the deleted file.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from console.ops.audit import AuditLog
from console.ops.session_log import WebSessionLog

COUNT_SWITCHES = (
    "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
    "print(db.execute('SELECT count(*) FROM switches').fetchone()[0]); db.close()"
)


def _seen_elsewhere(path: Path) -> int:
    done = subprocess.run([sys.executable, "-c", COUNT_SWITCHES, str(path)], capture_output=True, text=True,
                          check=True, timeout=30)
    return int(done.stdout)


def test_a_second_table_in_one_process_keeps_the_first_connections_writes_visible(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    audit = AuditLog(path)
    sessions = WebSessionLog(path)  # the same file, the same process
    try:
        assert _seen_elsewhere(path) == 0  # another process opens and closes a connection
        audit.begin(host="gpu1", service="k26", to_layout="EP8")
        assert _seen_elsewhere(path) == 1
        sessions.begin(remote="127.0.0.1", user_agent=None, readonly=True)
        audit.begin(host="gpu1", service="k26", to_layout="TP8")
        assert _seen_elsewhere(path) == 2
    finally:
        sessions.close()
        audit.close()


def test_an_existing_state_file_open_to_others_is_still_tightened(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    AuditLog(path).close()
    os.chmod(path, 0o644)
    WebSessionLog(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
