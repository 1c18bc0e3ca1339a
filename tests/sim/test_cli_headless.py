"""The headless commands as scripts use them: separate processes sharing one state dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import headless_cli
from headless_cli import cli, json_lines
from sim_fixtures import wait_until

demo_env = headless_cli.demo_env  # the fixture, used by name


def test_forced_tp4ep2_fails_with_oom_facts_then_rolls_back_to_ep8(demo_env):
    cwd, env = demo_env
    first = cli(cwd, env, "switch", "EP8", "--json")
    assert first.returncode == 0, first.stderr
    assert json_lines(first.stdout)[-1]["outcome"] == "ready"

    run = cli(cwd, env, "switch", "TP4EP2", "--force", "--json")
    assert run.returncode == 1, run.stderr
    events = json_lines(run.stdout)
    kinds = {e["event"] for e in events}
    assert {"step", "phase", "progress", "finding", "state", "result"} <= kinds
    result = events[-1]
    assert [e["event"] for e in events].count("result") == 1
    assert result["outcome"] == "failed" and result["layout"] == "TP4 EP2"
    failure = result["failure"]
    assert failure["kind"] == "cuda_oom"
    assert failure["gpu"] == 2 and failure["tried_bytes"] == 672 * 2**20
    assert failure["total_bytes"] > failure["in_use_bytes"] > failure["free_bytes"] > 0
    assert 0 <= result["detected_after_s"]  # how soon: bench/verdict_cases.py
    assert result["rollback"]["outcome"] == "ready" and result["rollback"]["layout"] == "EP8"
    assert 0 <= result["rollback"]["detected_after_s"]

    # A second process sees the same units: EP8 runs, healthy, holding GPU memory.
    status = cli(cwd, env, "status", "--json")
    assert status.returncode == 0, status.stderr
    line, idle, *nodes = json_lines(status.stdout)  # demo, then demo-vllm, demo-a, demo-b with nothing running
    head, worker = nodes  # demo-a, the head of a service over two hosts, and demo-b, a node of it
    assert (head["host"], head["active_layout"], worker["event"], worker["head"]) == ("demo-a", None, "node", "demo-a")
    assert idle["host"] == "demo-vllm" and idle["metrics"] is None and idle["metrics_error"] == "no unit running"
    assert line["active_layout"] == "EP8" and line["state"]["active"] == "active"
    assert line["health"]["status"] == "ready"
    assert line["gpu_total_mib"] == 8 * 97887 and line["gpu_used_mib"] > 8 * 60_000
    metrics = line["metrics"]  # the engine's own numbers, read from its /metrics
    assert metrics is not None, line["metrics_error"]
    assert metrics["running_requests"] == 0 and 0 <= metrics["kv_cache_usage"] < 1
    assert {"age_s", "waiting_requests", "generation_tokens_per_s", "prompt_tokens_per_s", "ttft_p50_s",
            "ttft_p99_s", "itl_p50_s", "itl_p99_s"} <= metrics.keys()

    tail = cli(cwd, env, "tail", "--host", "demo", "--unit", "sglang-k26@tp4ep2.service", "--json", "-n", "500")
    findings = [e["finding"] for e in json_lines(tail.stdout) if e["finding"]]
    assert any(f["kind"] == "cuda_oom" for f in findings)
    human_tail = cli(cwd, env, "tail", "--host", "demo", "--unit", "sglang-k26@tp4ep2.service", "-n", "500")
    assert ">> cuda_oom" in human_tail.stdout

    history = json_lines(cli(cwd, env, "history", "--json").stdout)
    assert [(h["to_layout"], h["outcome"]) for h in history] == [
        ("EP8", "ready"),
        ("TP4 EP2", "failed"),
        ("EP8", "ready"),
    ]
    assert history[2]["rollback_of"] == history[1]["id"]


def test_human_switch_output_names_the_oom_in_plain_words(demo_env):
    cwd, env = demo_env
    refused = cli(cwd, env, "switch", "TP4 EP2")
    assert refused.returncode == 1 and "REFUSED" in refused.stdout and "--force" in refused.stdout
    run = cli(cwd, env, "switch", "TP4 EP2", "--force", "--no-rollback")
    assert run.returncode == 1
    assert "FAILED: TP4 EP2" in run.stdout and "672.00 MiB" in run.stdout and "94.97 GiB" in run.stdout
    assert "phase" in run.stdout and "loading_weights" in run.stdout


def test_usage_errors_exit_2_with_one_line(demo_env):
    cwd, env = demo_env
    for args in (["switch", "NOPE"], ["switch", "EP8", "--timeout", "0"], ["status", "--host", "nope"]):
        run = cli(cwd, env, *args)
        assert run.returncode == 2, args
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_kill_9_mid_switch_is_marked_interrupted_by_the_next_start(demo_env):
    cwd, env = demo_env
    slow = dict(env, SERVE_CONSOLE_SIM_TIME_SCALE="0.5")
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "switch", "EP8", "--json"],
        cwd=cwd,
        env=slow,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:
            if json.loads(line)["event"] == "phase":
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    history = json_lines(cli(cwd, env, "history", "--json").stdout)
    assert [(h["to_layout"], h["outcome"]) for h in history] == [("EP8", "interrupted")]


def test_two_concurrent_switches_exactly_one_runs(demo_env):
    cwd, env = demo_env
    slower = dict(env, SERVE_CONSOLE_SIM_TIME_SCALE="0.1")  # a start of ~4 s: both runs overlap
    cmd = [sys.executable, "-m", "console", "switch", "EP8", "--json"]
    procs = [
        subprocess.Popen(cmd, cwd=cwd, env=slower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    done = [p.communicate(timeout=120) for p in procs]
    for out, err in done:
        assert json_lines(out), f"a console printed no result; its stderr: {err.strip()}"
    outs = [out for out, _ in done]
    outcomes = sorted(json_lines(out)[-1]["outcome"] for out in outs)
    assert outcomes == ["ready", "refused"]
    refused = next(json_lines(out)[-1] for out in outs if json_lines(out)[-1]["outcome"] == "refused")
    assert "another switch" in refused["reason"]
    assert sorted(p.returncode for p in procs) == [0, 1]


def test_demo_tells_the_seed_story_and_stops_its_units(tmp_path):
    # Port 30000 may be taken by another demo on this machine: the demo moves to a free port itself.
    # The demo's temporary state dir goes under this test's own TMPDIR, so the check below looks only
    # at processes this test started (another demo on the machine is none of its business).
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = dict(os.environ, SERVE_CONSOLE_SIM_TIME_SCALE="0.03", TMPDIR=str(own_tmp))
    env.pop("SERVE_CONSOLE_STATE_DIR", None)
    started = time.monotonic()
    run = cli(tmp_path, env, "demo", timeout=180)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert "FAILED: TP4 EP2" in run.stdout and "CUDA OOM" in run.stdout
    assert "ROLLED BACK: EP8 is ready again" in run.stdout
    assert time.monotonic() - started < 60
    leftovers = [p.name for p in own_tmp.glob("serve-console-demo-*") if p.name != "serve-console-demo-ports"]
    assert leftovers == []  # the temporary state dir is gone too (the shared port locks stay, by design)
    mine = str(own_tmp).encode()
    assert wait_until(lambda: not any(mine in _cmdline(p) for p in _pids()), 5)


def _pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""
