"""Delivering the outbox: to each Alertmanager and the webhook, in order, retried with back-off, never lost.

Each destination drains its own queue (console/ops/watch/store.py) oldest first, in batches. A batch
that does not land stays queued and is tried again after a back-off that doubles from 1 s to 60 s
(with jitter); a batch a destination refuses as malformed is tried one delivery at a time, and only a
delivery refused on its own is dropped (counted). Alertmanager also hears every firing alert again
every `resend_s`, each ending `TTL_RESENDS` resends later unless heard again, as Prometheus does: so a
daemon that stops for good leaves nothing firing there for ever, and one that restarts re-sends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from console.domain.alerts import FIRING, Alert
from console.hosts.endpoints import DeliveryError, JsonPoster
from console.ops.watch.store import AlertStore, Delivery

BATCH = 64
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
TTL_RESENDS = 4
ALERTMANAGER, WEBHOOK = "alertmanager", "webhook"


@dataclass
class Sink:
    """One destination and where its deliveries stand."""

    poster: JsonPoster
    kind: str
    """ALERTMANAGER or WEBHOOK."""
    next_try: float = 0.0
    backoff_s: float = 0.0
    one_at_a_time: bool = False
    error: str | None = None

    @property
    def name(self) -> str:
        return self.poster.name


def webhook_document(deliveries: Sequence[Delivery]) -> dict[str, Any]:
    """The webhook's body, in Alertmanager's own webhook shape, so receivers of that format read it."""
    alerts = []
    for d in deliveries:
        entry = d.alert.to_json()
        if d.status == FIRING:
            entry.update(status=FIRING, endsAt="0001-01-01T00:00:00Z", ends_at=None)
        alerts.append(entry)
    status = FIRING if any(a["status"] == FIRING for a in alerts) else "resolved"
    return {"version": "4", "receiver": "serve-console", "status": status, "alerts": alerts,
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "", "groupKey": ""}


class Deliverer:
    """Drains the outbox to every destination and re-sends firing alerts to Alertmanager.

    Args:
        store: The outbox.
        sinks: The destinations.
        resend_s: How often firing alerts are sent again.
        firing: The alerts that fire now (the daemon's book).
        say: Where one-line reports go (the daemon's log).
        clock: POSIX seconds.
    """

    def __init__(self, store: AlertStore, sinks: Sequence[Sink], *, resend_s: float,
                 firing: Callable[[], Iterable[Alert]], say: Callable[[str], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.sinks = list(sinks)
        self.resend_s = resend_s
        self.firing = firing
        self.say = say
        self.clock = clock
        self._wake = asyncio.Event()
        self._last_resend = 0.0
        self.delivered = 0

    def wake(self) -> None:
        """Something was queued: deliver now."""
        self._wake.set()

    def resend_soon(self) -> None:
        """A firing alert's text changed (its evidence came): re-send the firing alerts now."""
        self._last_resend = 0.0
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled."""
        while True:
            now = self.clock()
            await self.deliver_due(now)
            waits = [s.next_try - now for s in self.sinks if s.next_try > now]
            waits.append(self._last_resend + self.resend_s - now)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.05, min(waits))):
                    await self._wake.wait()
            self._wake.clear()

    async def deliver_due(self, now: float) -> None:
        """One round: each destination not backing off drains what it can; then the re-send, when due."""
        await asyncio.gather(*(self._drain(s) for s in self.sinks if s.next_try <= now))
        if now - self._last_resend >= self.resend_s:
            self._last_resend = now
            await asyncio.gather(*(self._resend(s) for s in self.sinks
                                   if s.kind == ALERTMANAGER and s.next_try <= now and not self.store.queued(s.name)))

    def _render(self, sink: Sink, deliveries: Sequence[Delivery]) -> Any:
        if sink.kind == ALERTMANAGER:
            ttl = TTL_RESENDS * self.resend_s
            return [d.alert.to_alertmanager(self.clock(), ttl) for d in deliveries]
        return webhook_document(deliveries)

    async def _drain(self, sink: Sink) -> None:
        while True:
            batch = self.store.pending(sink.name, 1 if sink.one_at_a_time else BATCH)
            if not batch:
                sink.one_at_a_time = False
                return
            try:
                await sink.poster.post(self._render(sink, batch))
            except DeliveryError as exc:
                if exc.retry:
                    self._failed(sink, batch, str(exc))
                    return
                if len(batch) > 1:
                    sink.one_at_a_time = True  # find the delivery it refuses; the others still go
                    continue
                self.store.rejected(batch[0])
                self.say(f"{sink.name}: refused {batch[0].alert.label('alertname')} for good, dropped: {exc}")
                continue
            self.store.delivered([d.id for d in batch])
            self.delivered += len(batch)
            if sink.error is not None:
                self.say(f"{sink.name}: reachable again; delivering the queue")
            sink.error, sink.backoff_s, sink.next_try = None, 0.0, 0.0

    def _failed(self, sink: Sink, batch: Sequence[Delivery], error: str) -> None:
        self.store.attempted([d.id for d in batch], error)
        self._back_off(sink)
        if sink.error != error:
            queued = self.store.queued(sink.name)
            self.say(f"{error}; {queued} queued, trying again in {sink.backoff_s:.0f} s")
        sink.error = error

    def _back_off(self, sink: Sink) -> None:
        """Wait longer before the next try: 1 s, doubling to 60 s, jittered so replicas do not march in step."""
        sink.backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, 2 * sink.backoff_s))
        sink.next_try = self.clock() + sink.backoff_s * random.uniform(0.8, 1.2)

    async def _resend(self, sink: Sink) -> None:
        alerts = list(self.firing())
        ttl = TTL_RESENDS * self.resend_s
        for start in range(0, len(alerts), BATCH):
            try:
                await sink.poster.post([a.to_alertmanager(self.clock(), ttl) for a in alerts[start:start + BATCH]])
            except DeliveryError as exc:
                self._back_off(sink)
                sink.error = str(exc)
                return

    async def close(self) -> None:
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                await sink.poster.close()
