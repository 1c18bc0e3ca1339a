"""Fixtures for the UI tests: the real app on simulated hosts, each test in its own state dir and port."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import pytest
from ports import free_port

sys.path.insert(0, str(Path(__file__).parent))  # screen_text, fixed_host

# The journal pane shows systemd's lines with their journal time in local time, as journalctl does:
# snapshots are drawn in UTC wherever they run.
os.environ["TZ"] = "UTC"
time.tzset()

TIME_SCALE = "0.02"


def demo_config_on_free_port():
    """The packaged demo cluster, each service moved to a free loopback port (tests run side by side)."""
    from console.config import demo_config_path, load_config, with_nodes

    config = load_config(demo_config_path())
    hosts = []
    for host in config.hosts:  # a port of its own per service: demo-vllm must not probe the Kimi engine
        services = tuple(dataclasses.replace(s, url=f"http://127.0.0.1:{free_port()}", cluster=None if s.cluster
                         is None else dataclasses.replace(s.cluster, dist_port=free_port(), ras_port=free_port()))
                         for s in host.services)  # fmt: skip
        hosts.append(dataclasses.replace(host, services=services))
    return dataclasses.replace(config, hosts=with_nodes(hosts))


@pytest.fixture
def sim_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SERVE_CONSOLE_SIM_TIME_SCALE", TIME_SCALE)
    return tmp_path


@pytest.fixture
def demo_app(sim_env: Path):
    """A factory for the console on the simulated demo host (units stopped when the app exits)."""
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    audits = []

    def build(**kwargs):
        config = demo_config_on_free_port()
        audit = open_audit(sim_env)
        audits.append(audit)
        kwargs.setdefault("stop_started_units", True)
        return ConsoleApp(open_hosts(config, state_dir=sim_env), config=config, audit=audit, **kwargs)

    yield build
    for audit in audits:
        audit.close()
