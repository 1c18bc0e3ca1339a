"""The watch daemon's outbox and its delivery: ordered, retried with back-off, bounded, nothing lost unsaid."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from waiting import await_for

from console.domain.alerts import (
    ENGINE_FAILED,
    FIRING,
    RESOLVED,
    AlertBook,
    AlertThresholds,
    Condition,
    Scope,
    Verdict,
    rfc3339,
)
from console.hosts.endpoints import DeliveryError
from console.ops.watch import ALERTMANAGER, WEBHOOK, AlertStore, Deliverer, Outbox, Sink


class FakePoster:
    """Records what it is sent; fails while `down` (retryable) or for a body `refuse` picks (not retryable)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list = []
        self.down = False
        self.refuse = lambda body: False

    async def post(self, document) -> None:
        if self.down:
            raise DeliveryError(f"{self.name}: unreachable (connection refused)", retry=True)
        if self.refuse(document):
            raise DeliveryError(f"{self.name}: HTTP 400: bad label", retry=False)
        self.sent.append(document)

    async def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fire(book: AlertBook, store: AlertStore, unit: str, now: float, sinks: list[str]) -> None:
    """Raise one failure alert for `unit` (a service of its own) and queue it, as the daemon does."""
    condition = Condition(ENGINE_FAILED, "gpu-1", unit, unit, summary=f"{unit} died")
    _queue(book, store, [Verdict(Scope(ENGINE_FAILED, "gpu-1", unit), (condition,))], now, sinks)


def resolve(book: AlertBook, store: AlertStore, unit: str, now: float, sinks: list[str]) -> None:
    _queue(book, store, [Verdict(Scope(ENGINE_FAILED, "gpu-1", unit))], now, sinks)


def _queue(book, store, verdicts, now, sinks) -> None:
    for t in book.apply(verdicts, now):
        stored = store.record(t)
        book.stored(stored)
        store.enqueue(sinks, t.kind, stored)


@pytest.fixture
def rig(tmp_path):
    store = AlertStore(tmp_path / "audit.sqlite3", queue_max=10)
    clock = Clock()
    am, hook = FakePoster("alertmanager http://am:9093"), FakePoster("webhook http://hook")
    book = AlertBook(AlertThresholds())
    lines: list[str] = []
    deliverer = Deliverer(Outbox(store, lines.append), [Sink(am, ALERTMANAGER), Sink(hook, WEBHOOK)], resend_s=60.0,
                          firing=lambda: list(book.firing.values()), say=lambda line: lines.append(line), clock=clock,
                          monotonic=clock)
    yield store, clock, am, hook, book, deliverer, lines
    store.close()


async def test_each_destination_gets_every_transition_in_order_and_the_queue_empties(rig):
    store, clock, am, hook, book, deliverer, _lines = rig
    fire(book, store, "a.service", clock.now, [am.name, hook.name])
    resolve(book, store, "a.service", clock.now + 5, [am.name, hook.name])
    clock.now += 5
    await deliverer.deliver_due(clock.now)
    posted = [a for body in am.sent for a in body]
    assert [a["labels"]["unit"] for a in posted][:2] == ["a.service", "a.service"]
    assert posted[1]["endsAt"] == "1970-01-01T00:16:45.000Z"  # resolved: its end, not a future one
    assert [a["status"] for body in hook.sent for a in body["alerts"]] == [FIRING, RESOLVED]
    assert hook.sent[0]["version"] == "4" and hook.sent[0]["receiver"] == "serve-console"
    assert store.queued() == 0


async def test_a_destination_down_keeps_its_queue_backs_off_and_delivers_it_all_when_back(rig):
    store, clock, am, hook, book, deliverer, lines = rig
    am.down = True
    fire(book, store, "a.service", clock.now, [am.name, hook.name])
    await deliverer.deliver_due(clock.now)
    assert store.queued(am.name) == 1 and store.queued(hook.name) == 0  # the webhook is not held up
    sink = deliverer.sinks[0]
    assert 0.8 <= sink.next_try - clock.now <= 1.2
    assert any("unreachable" in line and "1 queued" in line for line in lines)
    for _ in range(7):  # the back-off doubles up to 60 s
        clock.now = sink.next_try
        await deliverer.deliver_due(clock.now)
    assert sink.backoff_s == 60.0
    fire(book, store, "b.service", clock.now, [am.name, hook.name])
    am.down = False
    clock.now = sink.next_try
    await deliverer.deliver_due(clock.now)
    assert [a["labels"]["unit"] for body in am.sent for a in body][:2] == ["a.service", "b.service"]
    assert store.queued() == 0 and sink.backoff_s == 0
    assert any("reachable again" in line for line in lines)


async def test_a_full_queue_drops_its_oldest_resolved_delivery_first_and_counts_it(rig):
    store, clock, am, _hook, book, _deliverer, _lines = rig
    for i in range(4):  # 4 incidents, each fired and resolved: 8 deliveries
        fire(book, store, f"u{i}.service", clock.now + i, [am.name])
        resolve(book, store, f"u{i}.service", clock.now + i + 0.5, [am.name])
    for i in range(4, 7):  # 3 more that fire: 11 deliveries for a queue of 10
        fire(book, store, f"u{i}.service", clock.now + i, [am.name])
    pending = store.pending(am.name, 100)
    assert len(pending) == 10
    assert store.counters() == {f"dropped:{am.name}": 1}
    assert [(d.status, d.alert.label("unit")) for d in pending][:2] == [(FIRING, "u0.service"),
                                                                         (FIRING, "u1.service")]
    assert all(d.status == FIRING for d in pending if d.alert.label("unit") == "u0.service")


async def test_a_delivery_refused_as_malformed_is_dropped_alone_and_the_rest_go(rig):
    store, clock, am, _hook, book, deliverer, lines = rig
    am.refuse = lambda body: any(a["labels"].get("unit") == "bad.service" for a in body)
    for unit in ("a.service", "bad.service", "c.service"):
        fire(book, store, unit, clock.now, [am.name])
    await deliverer.deliver_due(clock.now)
    assert [a["labels"]["unit"] for body in am.sent for a in body if body][:2] == ["a.service", "c.service"]
    assert store.queued() == 0 and store.counters() == {f"rejected:{am.name}": 1}
    assert any("refused ServeEngineFailed for good" in line for line in lines)


async def test_firing_alerts_are_sent_again_each_resend_with_their_end_ahead(rig):
    store, clock, am, _hook, book, deliverer, _lines = rig
    fire(book, store, "a.service", clock.now, [am.name])
    await deliverer.deliver_due(clock.now)
    before = len(am.sent)
    clock.now += 61
    await deliverer.deliver_due(clock.now)
    resent = am.sent[before:]
    assert len(resent) == 1 and resent[0][0]["labels"]["unit"] == "a.service"
    assert resent[0][0]["startsAt"] == "1970-01-01T00:16:40.000Z"  # the incident's own start, kept
    assert resent[0][0]["endsAt"] == "1970-01-01T00:21:41.000Z"  # 4 resends ahead of now (1061 + 240)


async def test_the_store_keeps_incidents_across_a_reopen_and_forgets_old_resolved_ones(tmp_path):
    store = AlertStore(tmp_path / "audit.sqlite3", history_max=3)
    book = AlertBook(AlertThresholds())
    for i in range(6):
        fire(book, store, f"u{i}.service", 1000.0 + i, [])
        resolve(book, store, f"u{i}.service", 1000.5 + i, [])
    fire(book, store, "live.service", 2000.0, [])
    store.close()
    again = AlertStore(tmp_path / "audit.sqlite3")
    assert [a.label("unit") for a in again.firing()] == ["live.service"]
    kept = again.alerts()
    assert len([a for a in kept if not a.firing]) <= 4 and kept[0].label("unit") == "live.service"
    again.close()


async def test_a_wall_clock_step_back_neither_stops_the_resends_nor_ends_the_alert_early(tmp_path):
    store = AlertStore(tmp_path / "audit.sqlite3")
    wall = Clock()
    wall.now = 1_000_000.0
    am = FakePoster("alertmanager http://am:9093")
    book = AlertBook(AlertThresholds())
    deliverer = Deliverer(Outbox(store, print), [Sink(am, ALERTMANAGER)], resend_s=0.2,
                          firing=lambda: list(book.firing.values()), say=print, clock=wall)
    fire(book, store, "a.service", wall.now, [am.name])
    task = asyncio.create_task(deliverer.run())
    try:
        await until(lambda: len(am.sent) >= 2, what="the first re-send")
        wall.now -= 3600  # NTP steps the daemon's clock back an hour
        sent = len(am.sent)
        await until(lambda: len(am.sent) >= sent + 2, what="re-sends after the step")  # on time, still
        ends = am.sent[-1][0]["endsAt"]
        assert ends > rfc3339(1_000_000.0)  # ahead of the time it is: the steady clock's, not the stepped one's
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        store.close()


async def until(predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
    await await_for(predicate, what, timeout_s=timeout_s)
