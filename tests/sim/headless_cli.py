"""The packaged demo cluster for the headless switch CLI tests: its config on free ports, its own state dir, `cli`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sim_fixtures import demo_config_copy, engine_pids


@pytest.fixture
def demo_env(tmp_path):
    """The packaged demo cluster on free ports, with its own state dir; its units stopped at the end."""
    demo_config_copy(tmp_path)
    env = dict(
        os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"), SERVE_CONSOLE_SIM_TIME_SCALE="0.03"
    )
    yield tmp_path, env
    _stop_units(tmp_path, env)
    assert engine_pids(tmp_path / "state") == []


def _stop_units(tmp_path: Path, env: dict) -> None:
    code = (
        "import asyncio\nfrom console.config import load_config\nfrom console.factory import open_host\n"
        "async def main():\n    host = open_host(load_config('hosts.toml').hosts[0])\n"
        "    await host.services.stop_all()\n    await host.close()\nasyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=60, check=True)


def cli(cwd: Path, env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
