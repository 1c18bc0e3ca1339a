"""URLs in hosts.toml are checked once, at load: a broken bracket or a bad port is one file:line error,
never a traceback on every command (issue 18, B13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fleet_text import HOST, parse

from console.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("url, problem", [
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://prom:99999", "Port out of range"),
    ("http://prom:0", "port 0 out of range 1-65535"),
    ("http://prom:abc", "Port could not be cast to integer value"),
    ("http://prom:", "empty port in URL"),
])
def test_a_fleet_url_that_cannot_be_used_is_a_file_line_error(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(f'[fleet]\nprometheus = "{url}"\n')
    message = str(err.value)
    assert message.startswith("hosts.toml:2: fleet.prometheus: expected an http(s) URL"), message
    assert problem in message and "\n" not in message


def test_a_dcgm_url_with_a_bad_port_is_a_file_line_error() -> None:
    with pytest.raises(ConfigError, match=r"^hosts.toml:4: hosts.gpu-07.dcgm_url: port 0 out of range"):
        parse(host='gpus = "dcgm"\ndcgm_url = "http://127.0.0.1:0/metrics"')
    assert parse(host='gpus = "dcgm"\ndcgm_url = "http://[::1]:9400/metrics"').hosts[0].dcgm_url


def test_every_command_says_so_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text('[fleet]\nprometheus = "http://[::1"\n' + HOST.format(extra=""))
    proc = subprocess.run([sys.executable, "-m", "console", "--config", str(config), "status"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(f"serve-console: {config}:2: fleet.prometheus: expected an http(s) URL")
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
