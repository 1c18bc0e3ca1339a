"""A broken state dir or audit log is one line naming the file and what to do (issue 10, items 5, 14)."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys

import pytest

from console.cli import main
from console.hosts import state_dir as state_dir_module
from console.ops.audit import AuditLog


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def _one_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def _garbage(path):
    path.write_bytes(b"this is not a database\n" * 100)


def _truncated(path):
    log = AuditLog(path)
    for n in range(200):
        log.finish(log.begin(host="h", service="s", to_layout=f"L{n}" * 50), outcome="ready")
    log.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    for extra in ("-wal", "-shm"):
        (path.parent / (path.name + extra)).unlink(missing_ok=True)


@pytest.mark.parametrize("damage", [_garbage, _truncated])
@pytest.mark.parametrize("command", ["history", "status"])
def test_a_damaged_audit_log_is_one_line_naming_it_and_the_remedy(tmp_path, damage, command):
    state = tmp_path / "state"
    state.mkdir()
    audit = state / "audit.sqlite3"
    damage(audit)
    before = audit.read_bytes()
    (tmp_path / "hosts.toml").write_text(
        '[hosts.h]\ntransport = "local"\ngpus = "none"\n[hosts.h.services.s]\nengine = "vllm"\n'
        'url = "http://127.0.0.1:9"\nlayouts = ["TP1"]\ntemplate = "v@.service"\n'
    )
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(state))
    run = _cli(env, "--config", str(tmp_path / "hosts.toml"), command)
    line = _one_line(run)
    assert run.returncode == 1
    assert str(audit) in line and "damaged" in line and "mv " in line
    assert audit.read_bytes() == before  # not moved, not rewritten: the operator decides


def test_a_state_dir_that_is_a_file_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(blocker))
    run = _cli(env, "history")
    assert run.returncode == 1 and str(blocker) in _one_line(run) and "SERVE_CONSOLE_STATE_DIR" in run.stderr


def test_a_read_only_state_dir_is_one_line(tmp_path, monkeypatch, capsys):
    def read_only(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(state_dir_module, "probe_write", read_only)
    assert main(["history"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not writable (Read-only file system)" in err and str(tmp_path) in err


def test_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(state_dir_module, "disk_free_bytes", lambda path: 4096)
    assert main(["history"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the disk is full (4 KiB free)" in err


def test_the_audit_log_is_private_in_a_private_state_dir(tmp_path):
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg"))
    env.pop("SERVE_CONSOLE_STATE_DIR", None)
    own = tmp_path / "xdg" / "serve-console"
    own.mkdir(parents=True, mode=0o755)
    os.chmod(own, 0o755)
    run = _cli(env, "history")
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    assert stat.S_IMODE((own / "audit.sqlite3").stat().st_mode) == 0o600
