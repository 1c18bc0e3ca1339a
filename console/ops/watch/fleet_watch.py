"""With `[fleet]`: the watch reads every host from Prometheus, and opens SSH only to the hosts it needs.

Each `interval_s`, one round of the fleet's queries (console/ops/fleet/) gives every host's data age
(the unreachable-or-stale rule) and, for a host with one service, its engine's KV usage and waiting
requests. A host's own watch over SSH (its units, journals, `/health`) runs only while Prometheus shows
it in trouble (stale, a scrape target down, never seen) or one of its alerts fires, and for
`SSH_LINGER_ROUNDS` rounds after; the other hosts of a fleet of hundreds are never dialled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping

from console.domain.alerts import HostWatch, ServiceWatch
from console.ops.fleet import PrometheusFleet
from console.ops.watch.observe import HostObserver

#: Rounds a host's SSH watch goes on after its trouble ended (its alerts need it to resolve).
SSH_LINGER_ROUNDS = 12


class FleetWatch:
    """Feeds Prometheus' view of every host to its rules, and starts and stops the hosts' SSH watches.

    Args:
        fleet: The fleet's Prometheus.
        host_watches: Every host's rules.
        service_watches: Every host's services' rules.
        observers: Every host's SSH watch (started here only when needed).
        changed: Called with a host's name when its rules should judge again.
        firing: Whether an alert fires for a host (its SSH watch then stays).
        interval_s: Seconds between rounds.
        say: One-line reports.
        clock: POSIX seconds.
        at: The evaluation time to ask Prometheus for (None: its own now; tests fix it).
    """

    def __init__(self, fleet: PrometheusFleet, host_watches: Mapping[str, HostWatch],
                 service_watches: Mapping[str, Mapping[str, ServiceWatch]], observers: Mapping[str, HostObserver], *,
                 changed: Callable[[str], None], firing: Callable[[str], bool], interval_s: float,
                 say: Callable[[str], None], clock: Callable[[], float] = time.time,
                 at: Callable[[], float | None] = lambda: None) -> None:
        self.fleet = fleet
        self.host_watches = host_watches
        self.service_watches = service_watches
        self.observers = observers
        self.changed = changed
        self.firing = firing
        self.interval_s = interval_s
        self.say = say
        self.clock = clock
        self.at = at
        self.running: dict[str, asyncio.Task[None]] = {}
        """The hosts whose SSH watch runs now."""
        self._quiet_rounds: dict[str, int] = {}
        self._error: str | None = None

    async def run(self) -> None:
        try:
            while True:
                started = time.monotonic()
                await self.round()
                await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            for task in self.running.values():
                task.cancel()

    async def round(self) -> None:
        """One reading of the fleet, then each host judged, its SSH watch started or stopped."""
        now = self.clock()
        try:
            rows = {row.host: row for row in await self.fleet.rows(at=self.at())}
        except Exception as exc:  # Prometheus down: nobody's age is known; no host is called unreachable for it
            if str(exc) != self._error:
                self.say(f"{exc}; the hosts' ages are unknown until it answers")
            self._error = str(exc)
            for watch in self.host_watches.values():
                watch.source_failed(str(exc))
            return
        self._error = None
        for name, watch in self.host_watches.items():
            row = rows.get(name)
            watch.data_seen(row.age_s if row else None, now, row.error if row else "not in Prometheus")
            services = self.service_watches[name]
            if row is not None and len(services) == 1:  # the host's figures are its one service's
                next(iter(services.values())).observe_engine(row.kv_cache_usage, row.waiting_requests, now)
            trouble = row is None or row.stale or row.up is not True
            self._ssh(name, needed=trouble or self.firing(name))
            self.changed(name)

    def _ssh(self, name: str, *, needed: bool) -> None:
        task = self.running.get(name)
        if needed:
            self._quiet_rounds[name] = 0
            if task is None or task.done():
                self.running[name] = asyncio.create_task(self.observers[name].run(), name=f"watch-{name}")
            return
        if task is None:
            return
        self._quiet_rounds[name] = self._quiet_rounds.get(name, 0) + 1
        if self._quiet_rounds[name] > SSH_LINGER_ROUNDS:
            task.cancel()
            del self.running[name]

    async def close(self) -> None:
        for task in self.running.values():
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self.running.values(), return_exceptions=True)
        await self.fleet.close()
