"""The watch daemon starting on a host with history: the journal it reads back is judged by its own timestamps,
as a whole; nothing that ended before the daemon started fires, on its first start or on any restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from sim_fixtures import sim_host_config
from waiting import await_for
from webhook_stub import Receiver, serving

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import CRASH_LOOP, ENGINE_FAILED, HEALTH_DOWN, AlertThresholds
from console.hosts.endpoints import JsonPoster
from console.ops.switch import switch_layout
from console.ops.watch import WEBHOOK, AlertStore, Sink, WatchDaemon

READY_UNIT = "sim-k26@ep8.service"
OOM_UNIT = "sim-k26@tp4ep2.service"


async def until(predicate, timeout_s: float = 60.0, what: str = "condition") -> None:
    await await_for(predicate, what, timeout_s=timeout_s)


async def kill_main(host, unit: str) -> None:
    state = await host.services.state(unit)
    assert state.main_pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.main_pid, signal.SIGKILL)


async def test_a_death_repaired_before_the_daemon_started_fires_nothing_at_its_start_or_restart(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("hist", time_scale=0.01))
    probe = host.probes[host.config.services[0].name]

    async def ready() -> bool:
        return (await probe.probe()).status == "ready"

    async def dead() -> bool:
        return not (await host.services.state(READY_UNIT)).is_running

    await host.services.start(READY_UNIT)
    await until(ready, what="EP8 ready")
    await kill_main(host, READY_UNIT)  # a death...
    await until(dead, what="EP8 dead")
    await host.services.start(READY_UNIT)  # ...repaired: EP8 is ready again, before any daemon ran
    await until(ready, what="EP8 ready again")

    store = AlertStore(tmp_path / "audit.sqlite3")
    thresholds = AlertThresholds(state_grace_s=0.5)
    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=thresholds))
    receiver = Receiver()
    async with serving(receiver) as url:
        for run, unit in ((1, READY_UNIT), (2, OOM_UNIT)):  # the first start, then a restart on the same file
            lines: list[str] = []
            sink = Sink(JsonPoster(url, name="webhook http://127.0.0.1"), WEBHOOK)
            daemon = WatchDaemon([host], config, store, [sink], say=lines.append)
            task = asyncio.create_task(daemon.run())
            try:
                # a live failure, after the daemon has read the unit's journal back: what must fire
                await until(lambda d=daemon: _read_back(d, READY_UNIT), what="the history read")
                if unit == READY_UNIT:
                    await kill_main(host, READY_UNIT)
                else:
                    await host.services.start(OOM_UNIT)
                await receiver.wait_for(lambda u=unit: any(a["labels"].get("unit") == u for a in receiver.alerts()),
                                        what=f"the live failure of {unit}")

                async def drained() -> bool:
                    return store.queued() == 0

                await until(drained, what="the delivery recorded")  # else the next run sends it again
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await daemon.close()
            assert not [line for line in lines if line.startswith("RESOLVED")], (run, lines)
    seen = [(a["labels"]["alertname"], a["labels"]["unit"], a["status"]) for a in receiver.alerts()]
    assert seen == [(ENGINE_FAILED, READY_UNIT, "firing"), (ENGINE_FAILED, OOM_UNIT, "firing")]
    assert len(store.alerts()) == 2  # no false incident recorded either
    store.close()


async def _read_back(daemon: WatchDaemon, unit: str) -> bool:
    (observer,) = daemon.observers
    follower = observer.followers.get(unit)
    return follower is not None and follower.cursor is not None


async def test_an_engine_that_runs_but_stops_answering_health_raises_health_down_and_resolves(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("mute", time_scale=0.01))
    probe = host.probes[host.config.services[0].name]

    async def ready() -> bool:
        return (await probe.probe()).status == "ready"

    await host.services.start(READY_UNIT)
    await until(ready, what="EP8 ready")
    store = AlertStore(tmp_path / "audit.sqlite3")
    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=AlertThresholds(health_down_s=1.0)))
    receiver = Receiver()
    pid = (await host.services.state(READY_UNIT)).main_pid
    assert pid
    async with serving(receiver) as url:
        sink = Sink(JsonPoster(url, name="webhook http://127.0.0.1"), WEBHOOK)
        daemon = WatchDaemon([host], config, store, [sink], say=lambda line: None)
        task = asyncio.create_task(daemon.run())
        try:
            unit = daemon.service_watches["mute"][host.config.services[0].name].units[READY_UNIT]
            await until(lambda: _true(unit.ready), what="the daemon to see EP8 ready")
            os.kill(pid, signal.SIGSTOP)  # the unit stays active; /health stops answering
            await receiver.wait_for(lambda: any(a["labels"]["alertname"] == HEALTH_DOWN for a in receiver.alerts()),
                                    what="ServeHealthDown at the webhook")
            (alert,) = [a for a in receiver.alerts() if a["labels"]["alertname"] == HEALTH_DOWN]
            assert alert["labels"]["unit"] == READY_UNIT and alert["labels"]["severity"] == "critical"
            os.kill(pid, signal.SIGCONT)
            await receiver.wait_for(lambda: [a["status"] for a in receiver.alerts()
                                             if a["labels"]["alertname"] == HEALTH_DOWN] == ["firing", "resolved"],
                                    what="its resolve")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await daemon.close()
    store.close()


async def _true(value: bool) -> bool:
    return value


async def test_an_operators_forced_switches_and_their_rollbacks_are_no_crash_loop(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("ops", mapping="env-file", time_scale=0.01))  # one unit for every layout
    audit = sim_hosts.audit()
    unit_name = host.config.services[0].unit
    assert (await switch_layout(host, None, "EP8", audit=audit, timeout_s=60)).outcome == "ready"
    store = AlertStore(tmp_path / "audit-watch.sqlite3")
    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(interval_s=0.2, thresholds=AlertThresholds(crash_loop_restarts=3)))
    daemon = WatchDaemon([host], config, store, [], say=lambda line: None, audit=audit)
    task = asyncio.create_task(daemon.run())
    try:
        unit = daemon.service_watches["ops"][host.config.services[0].name].units[unit_name]
        await until(lambda d=daemon: _read_back(d, unit_name), what="the history read")
        for _ in range(3):  # the operator forces the layout that dies of its OOM; each rolls back to EP8
            result = await switch_layout(host, None, "TP4 EP2", force=True, audit=audit, timeout_s=60)
            assert result.outcome != "ready"
        last = (await host.services.state(unit_name)).since
        await until(lambda: _true(unit.ready and (unit.started_at or 0) >= (last or 0) - 1),
                    what="the daemon to see the last rollback ready")
        names = [a.label("alertname") for a in store.alerts()]
        assert CRASH_LOOP not in names, names  # each death is the operator's own; ServeEngineFailed may fire
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await daemon.close()
        store.close()
        audit.close()
