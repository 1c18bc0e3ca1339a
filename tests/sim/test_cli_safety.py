"""Headless commands never print host text with live controls or secrets (issue 10, items 3 and 14)."""

from __future__ import annotations

import json
import os

from sim_cli import UNIT, cli, journal_dir, sim_env  # noqa: F401 - the fixture is used by name

from console.sim.systemd.journal import append_entry

HOSTILE = "boom \x1b]52;c;ZWNobyBoaQ==\x07\x1b]0;owned\x07\x1b[2J \u009b2J \u202eevil\u202c\nforged line"
LIVE = set("\x1b\x07\u009b\u202e\u202c\n")


def _journal_with(tmp_path, *messages: str) -> None:
    unit_dir = journal_dir(tmp_path)
    unit_dir.mkdir(parents=True, exist_ok=True)
    for message in messages:
        append_entry(unit_dir / "journal.jsonl", message, pid=4242)


def test_tail_prints_hostile_journal_text_as_escapes_and_json_masks_only_secrets(sim_env):  # noqa: F811
    tmp_path, env = sim_env
    secret = "server_args=ServerArgs(api_key='sk-live-123', port=30000)"
    _journal_with(tmp_path, HOSTILE, secret)
    run = cli(tmp_path, env, "tail", "--unit", UNIT, "-n", "5")
    assert run.returncode == 0, run.stderr
    body = "".join(run.stdout.splitlines())
    assert not LIVE & set(body), run.stdout
    assert "\\x1b]52;c;" in run.stdout and "\\x9b2J" in run.stdout and "\\u202eevil" in run.stdout
    assert "api_key='***'" in run.stdout and "sk-live-123" not in run.stdout
    as_json = cli(tmp_path, env, "tail", "--unit", UNIT, "-n", "5", "--json")
    assert not LIVE & set(as_json.stdout.replace("\n", ""))
    messages = [json.loads(line)["message"] for line in as_json.stdout.splitlines()]
    # Controls exact (json.dumps escapes them), secrets masked: JSON is what gets shipped and stored.
    assert messages == [HOSTILE, "server_args=ServerArgs(api_key='***', port=30000)"]
    exact = cli(tmp_path, env, "tail", "--unit", UNIT, "-n", "5", "--json", "--no-redact")
    assert [json.loads(line)["message"] for line in exact.stdout.splitlines()] == [HOSTILE, secret]
    alone = cli(tmp_path, env, "tail", "--unit", UNIT, "--no-redact")
    assert alone.returncode != 0 and "--no-redact goes with --json" in alone.stderr


def test_triage_json_and_summary_carry_no_live_c1_or_bidi(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory \u009b2J\u202eevil\u202c Tried to allocate 2.00 GiB\n")
    for extra in ((), ("--json",)):
        run = cli(tmp_path, dict(os.environ), "triage", str(log), *extra)
        assert run.returncode == 1, run.stderr
        assert not LIVE & set(run.stdout.replace("\n", "")), run.stdout


def test_history_shows_a_failure_reason_from_the_journal_safely(tmp_path):
    from console.ops.audit import AuditLog

    state = tmp_path / "state"
    log = AuditLog(state / "audit.sqlite3")
    entry = log.begin(host="h", service="s", to_layout="EP8")
    log.finish(entry, outcome="failed", reason=f"{HOSTILE} --api-key sk-live-123")
    log.close()
    run = cli(tmp_path, dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(state)), "history")
    assert run.returncode == 0, run.stderr
    assert not LIVE & set(run.stdout.replace("\n", "")), run.stdout
    assert "--api-key ***" in run.stdout and "sk-live-123" not in run.stdout
