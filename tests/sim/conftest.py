"""Fixtures the simulated-host tests share."""

from __future__ import annotations

import contextlib

import pytest
from sim_fixtures import EXIT_PATH_S, KIMI, SimHosts, engine_pids, free_port
from waiting import WaitTimeout, await_for

from console.config import parse_config
from console.factory import open_hosts


@pytest.fixture
async def sim_hosts(tmp_path):
    """Simulated hosts under the test's tmp_path, closed (their engines stopped) after the test."""
    hosts = SimHosts(tmp_path)
    yield hosts
    await hosts.close()


@pytest.fixture
def ep8_up(sim_hosts):
    """A factory: `await ep8_up(...)` builds a simulated host (sim_hosts' arguments) and switches it to EP8,
    ready; what many tests start from."""
    from console.ops.switch.orchestrate import switch_layout

    async def up(cfg=None, **kwargs):
        host = sim_hosts(cfg, **kwargs)
        result = await switch_layout(host, None, "EP8", timeout_s=60)
        assert result.outcome == "ready", result.reason
        return host

    return up


#: The two-host cluster of the multi-node tests (issue 20): TP16 over demo-a (head) and demo-b.
MULTINODE_CONFIG = """
[hosts.demo-a]
transport = "sim"
gpus = "sim"
time_scale = 0.02
[hosts.demo-a.sim]
gpu_count = 8
gpu_total_mib = 97887
[hosts.demo-b]
transport = "sim"
gpus = "sim"
time_scale = 0.02
[hosts.demo-b.sim]
gpu_count = 8
gpu_total_mib = {worker_mib}

[hosts.demo-a.services.k26]
engine = "sglang"
url = "http://127.0.0.1:{port}"
template = "sglang-k26x2@.service"
model_config = "{model}"
nodes = ["demo-a", "demo-b"]
dist_port = {dist}
ras_port = {ras}
layouts = [{{ name = "TP16", args = "--tp-size 16", nodes = 2 }}, {{ name = "PP2 TP8", args = "--tp-size 8 --pp-size 2", nodes = 2 }}, "TP8"]
"""


@pytest.fixture
async def cluster(tmp_path, request):
    """TP16's two simulated hosts (issue 20): demo-a the head, demo-b the worker (its GPU MiB the param)."""
    worker_mib = getattr(request, "param", 97887)  # a smaller worker GPU: its own OOM
    text = MULTINODE_CONFIG.format(port=free_port(), model=KIMI, dist=free_port(), ras=free_port(), worker_mib=worker_mib)
    config = parse_config(text.encode(), "hosts.toml", base_dir=tmp_path)
    hosts = open_hosts(config, state_dir=tmp_path)
    yield hosts
    for host in hosts:
        await host.services.stop_all()
        await host.close()
    with contextlib.suppress(WaitTimeout):
        await await_for(lambda: not engine_pids(tmp_path), "the engines to exit", timeout_s=EXIT_PATH_S)
    assert engine_pids(tmp_path) == []
