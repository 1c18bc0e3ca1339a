"""The extension point for services over several hosts: a `rank_source` the daemon asks at each reading."""

from __future__ import annotations

import asyncio
import contextlib

from sim_fixtures import sim_host_config
from waiting import await_for

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import RANK_DEAD, AlertThresholds, RankLiveness
from console.ops.watch import AlertStore, WatchDaemon


async def test_a_rank_the_source_reports_dead_is_raised_and_resolves_when_alive(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("head"))
    alive = {"node 1": False}
    asked = []

    async def ranks(host_, service):
        asked.append((host_.name, service.name))
        return [RankLiveness("node 0", "head", "sim-k26@ep8.service"),
                RankLiveness("node 1", "worker-1", "sim-k26@ep8.service", alive["node 1"], "no NCCL RAS heartbeat")]

    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=AlertThresholds(rank_dead_s=0.5)))
    store = AlertStore(tmp_path / "audit.sqlite3")
    daemon = WatchDaemon([host], config, store, [], say=lambda line: None, rank_source=ranks)
    task = asyncio.create_task(daemon.run())
    try:
        await await_for(store.firing, "the dead rank's alert in the state file")
        (alert,) = store.firing()
        assert alert.label("alertname") == RANK_DEAD and alert.label("unit") == "sim-k26@ep8.service"
        assert "rank node 1 on worker-1 is not alive (no NCCL RAS heartbeat)" in alert.annotation("summary")
        assert alert.annotation("rank_host") == "worker-1"
        alive["node 1"] = True
        await await_for(lambda: not store.firing(), "the alert to resolve once the rank is back")
        assert store.firing() == [] and store.alerts()[0].ends_at is not None
        assert ("head", "k26") in asked
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()
        store.close()
