"""A watch daemon over simulated hosts, posting to a real Alertmanager (tests/alertmanager.py): the harness the
watch tests share."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from waiting import await_for

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import AlertThresholds
from console.hosts.endpoints import WEBHOOK_AUTHORIZATION_ENV, WEBHOOK_URL_ENV
from console.ops.watch import AlertStore, WatchDaemon, build_sinks


class Watch:
    """A watch daemon over one simulated host, run as a task of the test's loop; restartable."""

    def __init__(self, host, state_file: Path, am_url: str, webhook_url: str) -> None:
        self.host = host
        self.state_file = state_file
        thresholds = AlertThresholds(crash_loop_restarts=3, crash_loop_window_s=120.0, state_grace_s=1.0)
        self.config = ConsoleConfig(path=state_file.parent / "hosts.toml", hosts=(host.config,),
                                    watch=WatchConfig(alertmanagers=(am_url,), interval_s=0.3, resend_s=1.0,
                                                      thresholds=thresholds))
        self.environ = {WEBHOOK_URL_ENV: webhook_url + "/hook", WEBHOOK_AUTHORIZATION_ENV: "Bearer test-token"}
        self.lines: list[str] = []
        self.daemon: WatchDaemon | None = None
        self.task: asyncio.Task | None = None
        self.store: AlertStore | None = None

    def start(self, clock=time.time) -> WatchDaemon:
        self.store = AlertStore(self.state_file)
        self.daemon = WatchDaemon([self.host], self.config, self.store, build_sinks(self.config.watch, self.environ),
                                  say=self.lines.append, clock=clock)
        self.task = asyncio.create_task(self.daemon.run())
        return self.daemon

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.daemon is not None:
            await self.daemon.close()
        if self.store is not None:
            self.store.close()
        self.task = self.daemon = self.store = None


async def until(predicate, timeout_s: float = 30.0, what: str = "condition"):
    """`predicate` (blocking: it may ask Alertmanager) polled in a thread until truthy."""
    return await await_for(lambda: asyncio.to_thread(predicate), what, timeout_s=timeout_s, interval_s=0.1)
