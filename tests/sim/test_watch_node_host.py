"""A host that is only a node of a service over several hosts (no services of its own): the watch daemon reads
it through the units it runs for that service, calls it unreachable only when those cannot be read, and
resolves that once they can."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

import pytest
from sim_fixtures import KIMI, free_port
from waiting import await_for

from console.config import ConsoleConfig, WatchConfig, parse_config
from console.domain.alerts import HOST_UNREACHABLE, AlertThresholds
from console.errors import HostError
from console.factory import open_hosts
from console.ops.watch import AlertStore, WatchDaemon

CONFIG = """
[hosts.gpu-node-1]
transport = "sim"
gpus = "sim"
time_scale = 0.02
[hosts.gpu-node-1.sim]
gpu_count = 8
gpu_total_mib = 97887
[hosts.gpu-node-2]
transport = "sim"
gpus = "sim"
time_scale = 0.02
[hosts.gpu-node-2.sim]
gpu_count = 8
gpu_total_mib = 97887

[hosts.gpu-node-1.services.k26]
engine = "sglang"
url = "http://127.0.0.1:{port}"
template = "sglang-k26x2@.service"
model_config = "{model}"
nodes = ["gpu-node-1", "gpu-node-2"]
dist_port = {dist}
ras_port = {ras}
layouts = [{{ name = "TP16", args = "--tp-size 16", nodes = 2 }}, "TP8"]
"""


class LinkDown:
    """The service manager of a host whose connection is lost: every command fails at once."""

    async def state(self, unit: str):
        raise HostError("gpu-node-2", "connection lost (keepalive timed out)")

    def journal(self, unit: str, **_kwargs):
        raise HostError("gpu-node-2", "connection lost (keepalive timed out)")


async def until(predicate, timeout_s: float = 60.0, what: str = "condition") -> None:
    await await_for(predicate, what, timeout_s=timeout_s)


@pytest.fixture
async def cluster(tmp_path):
    text = CONFIG.format(port=free_port(), model=KIMI, dist=free_port(), ras=free_port())
    config = parse_config(text.encode(), "hosts.toml", base_dir=tmp_path)
    hosts = open_hosts(config, state_dir=tmp_path)
    yield config, hosts
    for host in hosts:
        await host.close()


async def test_a_node_only_host_is_read_through_its_node_units_and_unreachable_only_when_they_are_not(
        cluster, tmp_path):
    config, hosts = cluster
    thresholds = AlertThresholds(unreachable_s=1.0)
    config = replace(config, watch=WatchConfig(interval_s=0.2, thresholds=thresholds))
    assert isinstance(config, ConsoleConfig)
    store = AlertStore(tmp_path / "audit.sqlite3")
    daemon = WatchDaemon(hosts, config, store, [], say=lambda line: None)
    node = daemon.host_watches["gpu-node-2"]
    task = asyncio.create_task(daemon.run())

    def unreachable() -> bool:
        return any(a.label("alertname") == HOST_UNREACHABLE for a in store.firing())

    try:
        # a reading of the node after the threshold has passed (or, today, the false alert)
        await until(lambda: unreachable() or (node.last_ok or 0) > daemon.started_at + thresholds.unreachable_s,
                    what="a reading of gpu-node-2 after unreachable_s")
        assert not unreachable(), [a.annotation("summary") for a in store.firing()]
        worker = next(h for h in hosts if h.name == "gpu-node-2")
        manager = worker.services
        worker.services = LinkDown()  # type: ignore[assignment]
        await until(unreachable, what="gpu-node-2 unreachable once its units cannot be read")
        (alert,) = store.firing()
        assert alert.label("host") == "gpu-node-2" and "connection lost" in alert.annotation("summary")
        worker.services = manager
        await until(lambda: not unreachable(), what="the alert to resolve")
        assert [a.label("alertname") for a in store.alerts()] == [HOST_UNREACHABLE]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()
        store.close()
