"""The watch daemon through a lost connection: what a dropped SSH link does at the Host seam (every command
fails at once with a HostError, the journal streams end), on a simulated host."""

from __future__ import annotations

import asyncio
import contextlib

from sim_fixtures import sim_host_config
from waiting import await_for

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import ENGINE_FAILED, HOST_UNREACHABLE, AlertThresholds
from console.errors import HostError
from console.ops.watch import AlertStore, WatchDaemon


class LinkDown:
    """The service manager of a host whose connection is lost: every command fails at once, in one line."""

    async def state(self, unit: str):
        raise HostError("far", "connection lost (keepalive timed out)")

    def journal(self, unit: str, **_kwargs):
        raise HostError("far", "connection lost (keepalive timed out)")


async def until(predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
    await await_for(predicate, what, timeout_s=timeout_s)


async def test_a_lost_link_raises_unreachable_keeps_the_units_alerts_and_the_link_back_resolves_both(
        sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("far", time_scale=0.01))
    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=AlertThresholds(unreachable_s=1.0,
                                                                                        state_grace_s=0.5)))
    store = AlertStore(tmp_path / "audit.sqlite3")
    daemon = WatchDaemon([host], config, store, [], say=lambda line: None)
    task = asyncio.create_task(daemon.run())

    def firing() -> set[str]:
        return {a.label("alertname") for a in store.firing()}

    try:
        await host.services.start("sim-k26@tp4ep2.service")
        await until(lambda: ENGINE_FAILED in firing(), what="the failure")
        manager = host.services
        host.services = LinkDown()  # type: ignore[assignment]
        await host.journals.close()  # the journal streams end with the link
        await manager.start("sim-k26@ep8.service")  # comes up ready while nobody can see it
        await until(lambda: HOST_UNREACHABLE in firing(), what="the host to be unreachable")
        unreachable = next(a for a in store.firing() if a.label("alertname") == HOST_UNREACHABLE)
        assert "connection lost (keepalive timed out)" in unreachable.annotation("summary")
        assert ENGINE_FAILED in firing()  # not resolved by what could not be read
        host.services = manager
        await until(lambda: not firing(), what="both to resolve once the host is read again")
        names = sorted(a.label("alertname") for a in store.alerts())
        assert names == [ENGINE_FAILED, HOST_UNREACHABLE]  # one incident each: nothing raised twice
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()
        store.close()
