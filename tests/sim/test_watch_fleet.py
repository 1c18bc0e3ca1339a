"""The watch with `[fleet]`: every host from a real Prometheus, SSH only to the hosts that need it.

The synthetic fleet of tests/fleet_prometheus.py: gpu-0001 stopped reporting 480 s before its end,
gpu-0002 lags 120 s, gpu-0003's engine target is down, gpu-0000 and gpu-0004 are fresh. The hosts are
SSH hosts at a port where nothing listens: a watch that dialled one would fail, and say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from fleet_prometheus import fleet_prometheus_fixture  # noqa: F401 (the session fixture)
from sim_fixtures import free_port
from waiting import await_for

from console.config import (
    TEMPLATE,
    ConsoleConfig,
    FleetConfig,
    HostConfig,
    LayoutConfig,
    ServiceConfig,
    WatchConfig,
)
from console.domain.alerts import HOST_UNREACHABLE, KV_CACHE_HIGH, AlertThresholds
from console.domain.layout import Layout
from console.domain.values import Engine
from console.factory import open_host
from console.ops.watch import AlertStore, WatchDaemon

NAMES = ["gpu-0000", "gpu-0001", "gpu-0002", "gpu-0003", "gpu-0004"]


def ssh_host(name: str, port: int) -> HostConfig:
    service = ServiceConfig(name="llm", engine=Engine.SGLANG, url="http://127.0.0.1:30000", mapping=TEMPLATE,
                            template="sglang@.service", layouts=(LayoutConfig("TP8", Layout(tp=8)),))
    return HostConfig(name=name, transport="ssh", address="127.0.0.1", port=port, connect_timeout_s=1.0,
                      gpus="none", services=(service,))


async def test_prometheus_judges_every_host_and_only_those_in_trouble_are_dialled(fleet_prometheus, tmp_path):
    fleet, url = fleet_prometheus
    nobody = free_port()
    config = ConsoleConfig(
        path=tmp_path / "hosts.toml", hosts=tuple(ssh_host(n, nobody) for n in NAMES),
        fleet=FleetConfig(prometheus=url),
        watch=WatchConfig(interval_s=0.3, thresholds=AlertThresholds(unreachable_s=60, kv_usage_ratio=0.03,
                                                                     kv_usage_for_s=0.5)))
    hosts = [open_host(h) for h in config.hosts]
    store = AlertStore(tmp_path / "audit.sqlite3")
    lines: list[str] = []
    started = time.time()
    daemon = WatchDaemon(hosts, config, store, [], say=lines.append, fleet_at=lambda: fleet.end,
                         clock=lambda: fleet.end + time.time() - started)
    task = asyncio.create_task(daemon.run())
    try:
        await await_for(lambda: any(a.label("alertname") == KV_CACHE_HIGH for a in store.firing()),
                        "the KV cache alert in the state file", interval_s=0.1)
        firing = {(a.label("alertname"), a.label("host")) for a in store.firing()}
        assert {(HOST_UNREACHABLE, "gpu-0001"), (HOST_UNREACHABLE, "gpu-0002")} <= firing
        assert (HOST_UNREACHABLE, "gpu-0000") not in firing and (HOST_UNREACHABLE, "gpu-0004") not in firing
        assert (KV_CACHE_HIGH, "gpu-0004") in firing  # its engine's figures, from Prometheus alone
        stale = next(a for a in store.firing() if a.label("host") == "gpu-0001")
        assert "not seen in prometheus" in stale.annotation("summary")
        assert abs(stale.starts_at - (fleet.end - 480)) < 1
        assert daemon.fleet is not None
        # stale, lagging or a target down: their units are watched over SSH; the fresh ones are never dialled
        # (gpu-0004's KV alert is Prometheus' to judge)
        assert set(daemon.fleet.running) == {"gpu-0001", "gpu-0002", "gpu-0003"}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()
        for host in hosts:
            await host.close()
        store.close()
