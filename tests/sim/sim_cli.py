"""A one-host simulated cluster for headless CLI tests: its own hosts.toml, port and state dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sim_fixtures import KIMI, TEST_TIME_SCALE, engine_pids, free_port

HOST = "sim1"
UNIT = "sglang-k26@ep8.service"


def sim_toml(port: int) -> str:
    return f"""
[hosts.{HOST}]
transport = "sim"
gpus = "sim"
[hosts.{HOST}.services.k26]
engine = "sglang"
url = "http://127.0.0.1:{port}"
mapping = "template"
template = "sglang-k26@.service"
model_config = "{KIMI}"
layouts = ["TP8", "EP8"]
"""


@pytest.fixture
def sim_env(tmp_path):
    """(directory holding hosts.toml, env with its own state dir); every unit stopped at the end."""
    (tmp_path / "hosts.toml").write_text(sim_toml(free_port()))
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"),
               SERVE_CONSOLE_SIM_TIME_SCALE=str(TEST_TIME_SCALE))  # fmt: skip
    yield tmp_path, env
    code = (
        "import asyncio\nfrom console.config import load_config\nfrom console.factory import open_host\n"
        "async def main():\n    host = open_host(load_config('hosts.toml').hosts[0])\n"
        "    await host.services.stop_all()\n    await host.close()\nasyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=60, check=True)
    assert engine_pids(tmp_path / "state") == []


def cli(cwd: Path, env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def journal_dir(tmp_path: Path, unit: str = UNIT) -> Path:
    from console.hosts.state_dir import sim_host_dir

    return sim_host_dir(tmp_path / "state", HOST) / "units" / unit


def sim_pids(root: Path) -> list[int]:
    """Live simulated supervisors and engines whose command line names a path under `root`."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{entry.name}/stat") as fh:
                zombie = fh.read().rpartition(")")[2].split()[0] in ("Z", "X")
        except OSError:
            continue
        if not zombie and any(b"console.sim" in a for a in argv) and any(str(root).encode() in a for a in argv):
            out.append(int(entry.name))
    return out


def kill_leftovers(root: Path) -> list[int]:
    """SIGKILL what a run left behind under `root` (the test stays hermetic when the code under test fails)."""
    left = sim_pids(root)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def story_env(tmp_path: Path) -> dict:
    """The headless demo with its temporary state dir, and its port locks, under `tmp_path`."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), SERVE_CONSOLE_PORT_LOCK_DIR=str(tmp_path / "locks"))
    env.pop("SERVE_CONSOLE_STATE_DIR", None)
    return env
