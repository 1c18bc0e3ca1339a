"""Delivering the outbox: to each Alertmanager and the webhook, in order, retried with back-off, never lost.

Each destination drains its own queue (console/ops/watch/store.py, with memory when the state file
cannot be written: outbox.py) oldest first, in batches. A batch that does not land stays queued and is
tried again after a back-off that doubles from 1 s to 60 s (with jitter). Only a 400 or 422 blames the
request: that batch is tried one delivery at a time, and only a delivery refused on its own is dropped
(counted). Any other answer (a redirect, 404, 405, 413, 5xx) keeps everything queued; after
`SPLIT_AFTER` such answers in a row the batch is tried one delivery at a time too, so one delivery a
destination cannot take (a 500 on its body) holds up no other: it is dropped, counted and said, once it
failed alone `POISON_TRIES` times while others landed. Alertmanager also hears every firing alert again
every `resend_s`, each ending `TTL_RESENDS` resends later unless heard again, as Prometheus does: so a
daemon that stops for good leaves nothing firing there for ever, and one that restarts re-sends at once.
Back-offs and re-sends are timed on the monotonic clock (a step of the wall clock neither stops the
re-sends nor hurries them); the timestamps sent are the wall clock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from console.domain.alerts import FIRING, Alert
from console.hosts.endpoints import DeliveryError, JsonPoster
from console.ops.watch.outbox import Outbox
from console.ops.watch.store import Delivery

BATCH = 64
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
TTL_RESENDS = 4
#: Answered failures of a whole batch in a row before it is tried one delivery at a time.
SPLIT_AFTER = 3
#: Failures of one delivery tried alone, while others land, before it is dropped.
POISON_TRIES = 5
#: Deliveries that fail alone in one round, none landing, before the destination is judged down instead.
SOLO_PROBES = 3
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
    failures: int = 0
    """Answered failures of whole batches in a row (reset by a delivery that lands)."""

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
        outbox: What is owed (the state file's queue, and memory).
        sinks: The destinations.
        resend_s: How often firing alerts are sent again.
        firing: The alerts that fire now (the daemon's book).
        say: Where one-line reports go (the daemon's log).
        clock: POSIX seconds (the timestamps sent).
        monotonic: Seconds that never step (back-offs, re-sends).
    """

    def __init__(self, outbox: Outbox, sinks: Sequence[Sink], *, resend_s: float,
                 firing: Callable[[], Iterable[Alert]], say: Callable[[str], None],
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.outbox = outbox
        self.sinks = list(sinks)
        self.resend_s = resend_s
        self.firing = firing
        self.say = say
        self.clock = clock
        self.monotonic = monotonic
        self._anchor = (clock(), monotonic())
        self._wake = asyncio.Event()
        self._last_resend: float | None = None
        self._solo: dict[int, int] = {}
        """Delivery id -> its failures tried alone."""
        self._culprits: set[int] = set()
        """Deliveries that failed alone in a round in which others landed: the destination works, not for them."""
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
            now = self.monotonic()
            await self.deliver_due(now)
            waits = [s.next_try - now for s in self.sinks if s.next_try > now]
            waits.append((self._last_resend or now) + self.resend_s - now)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.05, min(waits))):
                    await self._wake.wait()
            self._wake.clear()

    async def deliver_due(self, now: float) -> None:
        """One round (`now` on the monotonic clock): each destination not backing off drains what it can;
        then the re-send, when due."""
        await asyncio.gather(*(self._drain(s) for s in self.sinks if s.next_try <= now))
        if self._last_resend is None or now - self._last_resend >= self.resend_s:
            self._last_resend = now
            await asyncio.gather(*(self._resend(s) for s in self.sinks
                                   if s.kind == ALERTMANAGER and s.next_try <= now
                                   and not self.outbox.queued(s.name)))

    def _for_alertmanager(self, alert: Alert) -> dict[str, Any]:
        """The alert as Alertmanager takes it, its end judged against both clocks: the wall clock and the
        steady one (the wall clock at the start plus monotonic time). A firing alert ends `TTL_RESENDS`
        re-sends after the later of the two, a resolved one at the earlier at the latest: whichever of them
        a step of the wall clock made wrong, Alertmanager neither ends a firing alert early nor keeps a
        resolved one firing for the length of the step."""
        wall = self.clock()
        steady = self._anchor[0] + (self.monotonic() - self._anchor[1])
        if alert.ends_at is not None:
            alert = replace(alert, ends_at=max(alert.starts_at, min(alert.ends_at, wall, steady)))
        return alert.to_alertmanager(max(wall, steady), TTL_RESENDS * self.resend_s)

    def _render(self, sink: Sink, deliveries: Sequence[Delivery]) -> Any:
        if sink.kind == ALERTMANAGER:
            return [self._for_alertmanager(d.alert) for d in deliveries]
        return webhook_document(deliveries)

    async def _drain(self, sink: Sink) -> None:
        skip: set[int] = set()
        """Deliveries that failed alone this round."""
        landed_alone = False
        while True:
            alone = sink.one_at_a_time
            batch = self.outbox.pending(sink.name, 1 if alone else BATCH, skip)
            if not batch:
                if not skip:
                    sink.one_at_a_time = False
                self._after_split(sink, skip, landed_alone)
                return
            try:
                await sink.poster.post(self._render(sink, batch))
            except DeliveryError as exc:
                if not alone:
                    if not exc.retry or (exc.status is not None and sink.failures + 1 >= SPLIT_AFTER):
                        sink.one_at_a_time = True  # find the delivery it refuses; the others still go
                        continue
                    sink.failures += exc.status is not None
                    self._failed(sink, batch, str(exc))
                    return
                if not exc.retry:
                    self._drop(sink, batch[0], f"refused {batch[0].alert.label('alertname')} for good, "
                                               f"dropped: {exc}")
                    continue
                skip.add(batch[0].id)
                if exc.status is not None and exc.status >= 500:  # a 3xx/404/405/413 is never the delivery's
                    self._solo[batch[0].id] = self._solo.get(batch[0].id, 0) + 1
                self.outbox.attempted(batch, str(exc))
                if exc.status is None or (not landed_alone and len(skip) >= SOLO_PROBES):
                    self._failed(sink, [], str(exc))  # the destination, not one delivery: wait for it
                    return
                continue
            landed_alone = landed_alone or alone
            self.outbox.delivered(batch)
            for d in batch:
                self._solo.pop(d.id, None)
                self._culprits.discard(d.id)
            self.delivered += len(batch)
            if sink.error is not None:
                self.say(f"{sink.name}: reachable again; delivering the queue")
            sink.error, sink.backoff_s, sink.next_try, sink.failures = None, 0.0, 0.0, 0

    def _after_split(self, sink: Sink, skip: set[int], landed_alone: bool) -> None:
        """The end of a round one at a time: what failed alone while others landed is what the destination
        cannot take; each is dropped once it failed alone POISON_TRIES times, and tried again until then."""
        if not skip:
            return
        if landed_alone:
            self._culprits |= skip
        if skip & self._culprits:
            for delivery in self.outbox.pending(sink.name, len(skip) + BATCH):
                if delivery.id in skip & self._culprits and self._solo.get(delivery.id, 0) >= POISON_TRIES:
                    self._drop(sink, delivery, f"failed {POISON_TRIES} times alone while other deliveries "
                                               f"landed: dropped {delivery.alert.label('alertname')} "
                                               f"({delivery.alert.label('host')}) so that it holds up no other")
                    skip.discard(delivery.id)
        if skip:
            tries = max(1, *(self._solo.get(i, 0) for i in skip))
            sink.next_try = self.monotonic() + min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** tries)

    def _drop(self, sink: Sink, delivery: Delivery, why: str) -> None:
        self.outbox.rejected(delivery)
        self._solo.pop(delivery.id, None)
        self._culprits.discard(delivery.id)
        self.say(f"{sink.name}: {why}")

    def _failed(self, sink: Sink, batch: Sequence[Delivery], error: str) -> None:
        if batch:
            self.outbox.attempted(batch, error)
        self._back_off(sink)
        if sink.error != error:
            queued = self.outbox.queued(sink.name)
            self.say(f"{error}; {queued} queued, trying again in {sink.backoff_s:.0f} s")
        sink.error = error

    def _back_off(self, sink: Sink) -> None:
        """Wait longer before the next try: 1 s, doubling to 60 s, jittered so replicas do not march in step."""
        sink.backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, 2 * sink.backoff_s))
        sink.next_try = self.monotonic() + sink.backoff_s * random.uniform(0.8, 1.2)

    async def _resend(self, sink: Sink) -> None:
        alerts = list(self.firing())
        for start in range(0, len(alerts), BATCH):
            try:
                await sink.poster.post([self._for_alertmanager(a) for a in alerts[start:start + BATCH]])
            except DeliveryError as exc:
                self._back_off(sink)
                sink.error = str(exc)
                return

    async def close(self) -> None:
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                await sink.poster.close()
