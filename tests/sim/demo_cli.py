"""The packaged demo cluster for the probe/explore CLI tests: its config on free ports, its own state dir, `cli` with `--host demo`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sim_fixtures import demo_config_copy, engine_pids

from console.config import load_config

HOST = ("--host", "demo")


@pytest.fixture
def demo_env(tmp_path):
    """The packaged demo cluster on free ports with its own state dir; its units stopped at the end."""
    demo_config_copy(tmp_path)
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"), SERVE_CONSOLE_SIM_TIME_SCALE="0.03")
    yield tmp_path, env
    asyncio.run(_stop_units(tmp_path))
    assert engine_pids(tmp_path / "state") == []


async def _stop_units(tmp_path: Path) -> None:
    from console.factory import open_host

    for cfg in load_config(str(tmp_path / "hosts.toml")).hosts:
        host = open_host(cfg, state_dir=tmp_path / "state")
        await host.services.stop_all()
        await host.close()


def cli(cwd: Path, env: dict, command: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "console", command, *HOST, *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
