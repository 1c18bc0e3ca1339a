"""The README's commands work as written from the repository, against the demo host's state: its units
run where the demo put them (here: free ports, as a demo moved off taken ones), and `status`, `switch`
and `tail` from the repo's own hosts.toml reach them there, never the packaged ports 30000 and 8000."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest
from sim_fixtures import REPO, engine_pids, free_port

README_COMMANDS = re.findall(r"^serve-console (.+?)(?:\s+#.*)?$", (REPO / "README.md").read_text(), flags=re.MULTILINE)


def run(cwd, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip


@pytest.fixture
def demo_state(tmp_path):
    """The demo's units (EP8 on demo, TP4 on demo-vllm) running on free ports in a state dir of the test's."""
    text = (REPO / "hosts.toml").read_text()
    text = re.sub(r"http://127\.0\.0\.1:\d+", lambda _m: f"http://127.0.0.1:{free_port()}", text)
    text = text.replace('model_config = "console/', f'model_config = "{REPO}/console/')
    (tmp_path / "hosts.toml").write_text(text)
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"), SERVE_CONSOLE_SIM_TIME_SCALE="0.03")
    for layout, host in (("EP8", "demo"), ("TP4", "demo-vllm")):
        started = run(tmp_path, env, "switch", layout, "--host", host)
        assert started.returncode == 0, started.stdout + started.stderr
    yield env
    for host in ("demo", "demo-vllm"):
        run(tmp_path, env, "stop", "--host", host)
    assert engine_pids(tmp_path / "state") == []


def engine_ports(state_root) -> set[int]:
    ports = set()
    for pid in engine_pids(state_root):
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().decode().split("\0")
        ports |= {int(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--port"}
    return ports


def test_the_readmes_commands_work_from_the_repo_against_the_demos_state(demo_state, tmp_path):
    assert "status --json" in README_COMMANDS and "switch EP8 --host demo" in README_COMMANDS
    assert 'switch "TP4 EP2" --host demo --force --json' in README_COMMANDS
    assert "tail -f --host demo" in README_COMMANDS
    env = demo_state

    status = run(REPO, env, "status", "--json")
    assert status.returncode == 0, status.stderr
    lines = [json.loads(line) for line in status.stdout.splitlines()]
    services = [s for s in lines if s["event"] == "status"]
    assert {(s["host"], s["active_layout"], s["health"]["status"]) for s in services if s["active_layout"]} == {
        ("demo", "EP8", "ready"), ("demo-vllm", "TP4", "ready")}
    # demo-a heads DeepSeek-V3 over demo-a and demo-b, not started by the README's commands.
    assert [(s["host"], s["event"]) for s in lines if s["host"] in ("demo-a", "demo-b")] == [
        ("demo-a", "status"), ("demo-b", "node")]

    again = run(REPO, env, "switch", "EP8", "--host", "demo")
    assert again.returncode == 0 and "UNCHANGED" in again.stdout, again.stdout + again.stderr

    forced = run(REPO, env, "switch", "TP4 EP2", "--host", "demo", "--force", "--json")
    result = json.loads(forced.stdout.splitlines()[-1])
    assert forced.returncode == 1 and result["outcome"] == "failed", forced.stdout[-2000:] + forced.stderr
    assert result["failure"]["kind"] == "cuda_oom" and result["rollback"]["outcome"] == "ready"

    follow = subprocess.Popen([sys.executable, "-m", "console", "tail", "-f", "--host", "demo"], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = threading.Timer(60, follow.kill)
    deadline.start()
    try:
        first = follow.stdout.readline()
        assert "sglang-k26@ep8.service" in first, first + follow.stderr.read() if follow.poll() else first
    finally:
        deadline.cancel()
        follow.terminate()
        follow.wait(timeout=30)
    assert not engine_ports(tmp_path / "state") & {30000, 8000}  # the packaged ports were never used
