"""`serve-console demo` honours `readonly = true` from the operator's config, and prints blank lines, not a
literal `\\n`."""

from __future__ import annotations

import re
import subprocess
import sys

from sim_cli import kill_leftovers, sim_toml, story_env
from sim_fixtures import REPO, engine_pids, free_port


def demo(tmp_path, *args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args, "demo", "--time-scale", "0.03"], cwd=cwd,
                          env=story_env(tmp_path), capture_output=True, text=True, timeout=180)  # fmt: skip


def test_readonly_true_in_the_config_refuses_the_story(tmp_path):
    (tmp_path / "hosts.toml").write_text("[console]\nreadonly = true\n" + sim_toml(free_port()))
    try:
        for run in (demo(tmp_path, cwd=tmp_path), demo(tmp_path, "--config", str(tmp_path / "hosts.toml"))):
            assert run.returncode == 1, run.stdout
            assert run.stderr.strip() == (f"serve-console: read-only mode (readonly = true in {tmp_path / 'hosts.toml'})"
                                          ": refusing to play the demo story (it switches layouts and stops units)")
            assert run.stdout == ""
        assert engine_pids(tmp_path) == []
    finally:
        kill_leftovers(tmp_path)


def test_the_story_prints_no_literal_newline(tmp_path):
    try:
        run = demo(tmp_path)
        assert run.returncode == 0, run.stderr
        assert "\\n" not in run.stdout
        lines = run.stdout.splitlines()
        assert "" in lines and "1. Switch to EP8 (--tp-size 8 --ep-size 8), the story's best layout:" in lines
        assert "Stopping the demo's units..." in lines
    finally:
        kill_leftovers(tmp_path)


def test_the_two_host_story_names_the_dead_worker_while_the_head_answers_200(tmp_path):
    """`demo --nodes` (issue 20): TP16 over demo-a and demo-b, demo-b's engine killed, the dead node named
    at once with its cause from demo-b's own journal, the head's /health still 200."""
    import json

    try:
        run = subprocess.run([sys.executable, "-m", "console", "demo", "--nodes", "--json", "--time-scale", "0.03"],
                             cwd=REPO, env=story_env(tmp_path), capture_output=True, text=True, timeout=180)  # fmt: skip
        assert run.returncode == 0, run.stderr
        events = [json.loads(line) for line in run.stdout.splitlines()]
        assert {e.get("node") for e in events if e["event"] == "phase"} == {"demo-a", "demo-b"}
        verdict = events[-1]
        assert verdict["event"] == "verdict" and verdict["after_s"] >= 0  # how soon: bench/verdict_cases.py
        assert verdict["health"]["http_status"] == 200 and verdict["group"] == "dead"
        worker = verdict["ranks"][1]
        assert (worker["host"], worker["state"], worker["ranks"]) == ("demo-b", "dead", [8, 15])
        assert "killed by signal 9/KILL" in worker["cause"]["summary"]
        assert engine_pids(tmp_path) == []
    finally:
        kill_leftovers(tmp_path)


def test_the_stall_story_names_the_stall_and_the_diverged_rank_while_health_answers_200(tmp_path):
    """`demo --stall` (issue 26): Qwen3 TP4 on demo-vllm, a client streaming, the 4th rank diverges; every
    reading's /health is 200 and the units run; the verdict is stalled and names GPU 3."""
    import json

    try:
        run = subprocess.run([sys.executable, "-m", "console", "demo", "--stall", "--json", "--time-scale", "0.03"],
                             cwd=REPO, env=story_env(tmp_path), capture_output=True, text=True, timeout=240)  # fmt: skip
        assert run.returncode == 0, run.stderr
        events = [json.loads(line) for line in run.stdout.splitlines()]
        readings = [e for e in events if e["event"] == "reading"]
        assert readings and {r["health"]["http_status"] for r in readings} == {200}
        assert all(r["state"]["sub"] == "running" for r in readings)
        assert readings[0]["serving"]["state"] != "stalled"
        assert readings[-1]["serving"]["state"] == "stalled" and readings[-1]["serving"]["ranks"] == ["GPU 3"]
        verdict = events[-1]
        assert verdict["event"] == "verdict" and verdict["http_status"] == 200 and verdict["ranks"] == ["GPU 3"]
        # the simulated busy-wait reads 96-100% like the reports' (vllm#46097: SM~96%), the diverged rank 0%
        assert re.search(r"GPU 3 idle at 0% .* 3 GPUs spin at (9[5-9]|100)%", verdict["ranks_words"]), verdict
        assert engine_pids(tmp_path) == []
    finally:
        kill_leftovers(tmp_path)
