"""Bounds (issue 10, item 12): files named by config are read with a limit, the sim time scale is
checked, and a closed stdout is not a host error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sim_cli import cli, sim_env  # noqa: F401 - the fixture is used by name

from console.config import parse_config
from console.domain.fit.model_spec import load_model_spec
from console.errors import ConfigError, UsageError

SERVICE = """
[hosts.h]
transport = "local"
gpus = "none"
[hosts.h.services.s]
engine = "sglang"
url = "http://127.0.0.1:30000"
template = "s@.service"
layouts = ["TP8"]
model_config = "{path}"
"""


def test_a_model_config_that_never_ends_is_refused_at_load_without_reading_it_whole():
    with pytest.raises(ConfigError, match="larger than 16 MiB") as caught:
        parse_config(SERVICE.format(path="/dev/zero").encode(), "hosts.toml", base_dir=Path("."))
    assert str(caught.value).startswith("hosts.toml:")
    with pytest.raises(UsageError, match="larger than 16 MiB"):
        load_model_spec("/dev/zero")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "fast"])
def test_a_bad_sim_time_scale_is_one_line(sim_env, value):  # noqa: F811
    tmp_path, env = sim_env
    run = cli(tmp_path, dict(env, SERVE_CONSOLE_SIM_TIME_SCALE=value), "status", timeout=30)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and f"SERVE_CONSOLE_SIM_TIME_SCALE={value}: expected a number above 0" in lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_a_bad_demo_time_scale_is_one_line(tmp_path, value):
    run = subprocess.run([sys.executable, "-m", "console", "demo", "--time-scale", value], cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert run.returncode == 2 and "expected a number above 0" in run.stderr and "Traceback" not in run.stderr


def test_a_closed_stdout_is_not_a_host_error(sim_env):  # noqa: F811 - `status | head -0`
    tmp_path, env = sim_env
    proc = subprocess.Popen([sys.executable, "-m", "console", "status"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    proc.stdout.close()  # as `head -0` does before status writes its first line
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b"", err.decode()


def test_a_config_file_that_never_ends_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "console", "--config", "/dev/zero", "status"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert run.returncode == 2 and run.stderr.strip() == "serve-console: /dev/zero: larger than 4 MiB: not a hosts.toml"
