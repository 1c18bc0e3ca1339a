"""Delivery to a destination that misbehaves, over real HTTP on loopback: a redirect, a 404/405/413, a 500 on
one delivery's body, and the state file's disk full. Nothing is dropped that the destination could take."""

from __future__ import annotations

from dataclasses import replace

import pytest
from webhook_stub import Receiver, serving

from console.domain.alerts import ENGINE_FAILED, AlertBook, AlertThresholds, Condition, Scope, Verdict
from console.hosts.endpoints import JsonPoster
from console.ops.watch import WEBHOOK, AlertStore, Deliverer, Outbox, Sink
from console.ops.watch.delivery import POISON_TRIES


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def rig(tmp_path):
    receiver = Receiver()
    async with serving(receiver) as url:
        store = AlertStore(tmp_path / "audit.sqlite3")
        clock = Clock()
        lines: list[str] = []
        book = AlertBook(AlertThresholds())
        sink = Sink(JsonPoster(url, name="webhook http://127.0.0.1"), WEBHOOK)
        outbox = Outbox(store, lines.append)
        deliverer = Deliverer(outbox, [sink], resend_s=60.0, firing=lambda: list(book.firing.values()),
                              say=lines.append, clock=clock, monotonic=clock)
        yield receiver, store, outbox, book, deliverer, sink, clock, lines
        await deliverer.close()
        store.close()


def fire(book: AlertBook, store: AlertStore, sink: Sink, unit: str, now: float, summary: str = "") -> None:
    condition = Condition(ENGINE_FAILED, "gpu-node-1", unit, unit, summary=summary or f"{unit} died")
    for t in book.apply([Verdict(Scope(ENGINE_FAILED, "gpu-node-1", unit), (condition,))], now):
        stored = store.record(t)
        book.stored(stored)
        store.enqueue([sink.name], t.kind, stored)


async def rounds(deliverer: Deliverer, sink: Sink, clock: Clock, n: int) -> None:
    """n delivery rounds, each when the sink's back-off ends (the clock is the test's)."""
    for _ in range(n):
        clock.now = max(clock.now, sink.next_try) + 0.001
        await deliverer.deliver_due(clock.now)


@pytest.mark.parametrize(("status", "location"), [(302, "https://elsewhere.example/hook"), (307, "/moved"),
                                                  (404, ""), (405, ""), (413, "")])
async def test_a_destination_that_redirects_or_refuses_every_delivery_keeps_the_queue_and_says_so(
        rig, status, location):
    receiver, store, _outbox, book, deliverer, sink, clock, lines = rig
    receiver.status, receiver.location = status, location
    fire(book, store, sink, "a.service", clock.now)
    fire(book, store, sink, "b.service", clock.now)
    await rounds(deliverer, sink, clock, 8)
    assert receiver.attempts >= 8
    assert store.queued(sink.name) == 2 and store.counters() == {}  # nothing dropped
    said = [line for line in lines if f"HTTP {status}" in line]
    assert len(said) == 1, lines  # once, in one line, while the answer stays the same
    assert "stays queued" in said[0] and "2 queued" in said[0] and "\n" not in said[0]
    receiver.status = 200  # the operator fixed the URL (or the proxy)
    await rounds(deliverer, sink, clock, 2)
    assert sorted(receiver.units()) == ["a.service", "b.service"] and store.queued() == 0


async def test_a_400_for_one_delivery_drops_only_that_one(rig):
    receiver, store, _outbox, book, deliverer, sink, clock, lines = rig
    receiver.status = 400
    fire(book, store, sink, "a.service", clock.now)
    await rounds(deliverer, sink, clock, 1)
    assert store.queued() == 0 and store.counters() == {f"rejected:{sink.name}": 1}
    assert any("refused ServeEngineFailed for good" in line for line in lines)


async def test_one_delivery_answered_500_holds_up_no_later_alert(rig):
    receiver, store, _outbox, book, deliverer, sink, clock, lines = rig
    receiver.poison = "POISONWORD"
    fire(book, store, sink, "poison.service", clock.now, summary="CUDA OOM ... POISONWORD")
    await rounds(deliverer, sink, clock, 1)
    fire(book, store, sink, "later.service", clock.now)  # a real death, after it
    fire(book, store, sink, "last.service", clock.now)
    for _ in range(40):
        if "later.service" in receiver.units() and "last.service" in receiver.units():
            break
        await rounds(deliverer, sink, clock, 1)
    assert receiver.units() == ["later.service", "last.service"]
    for _ in range(40):  # the one it cannot take goes, said, after POISON_TRIES tries alone
        if store.queued() == 0:
            break
        await rounds(deliverer, sink, clock, 1)
    assert store.queued() == 0 and store.counters() == {f"rejected:{sink.name}": 1}
    dropped = [line for line in lines if f"failed {POISON_TRIES} times alone" in line]
    assert len(dropped) == 1 and "ServeEngineFailed" in dropped[0]


async def test_a_destination_down_for_every_delivery_drops_nothing_however_long(rig):
    receiver, store, _outbox, book, deliverer, sink, clock, _lines = rig
    receiver.status = 500
    for unit in ("a.service", "b.service", "c.service", "d.service"):
        fire(book, store, sink, unit, clock.now)
    await rounds(deliverer, sink, clock, 30)
    assert store.queued() == 4 and store.counters() == {}
    receiver.status = 200
    await rounds(deliverer, sink, clock, 2)
    assert sorted(receiver.units()) == ["a.service", "b.service", "c.service", "d.service"]


async def test_deliveries_held_in_memory_while_the_state_file_is_full_go_out_after_the_files(rig):
    receiver, store, outbox, book, deliverer, sink, clock, lines = rig
    receiver.status = 503
    fire(book, store, sink, "a.service", clock.now)
    alert = replace(next(iter(book.firing.values())), ends_at=clock.now + 1)
    outbox.hold([sink.name], "resolved", alert)  # as the daemon does when the file refuses the write
    assert outbox.queued(sink.name) == 2
    await rounds(deliverer, sink, clock, 2)
    receiver.status = 200
    await rounds(deliverer, sink, clock, 2)
    assert [a["status"] for body in receiver.bodies for a in body["alerts"]] == ["firing", "resolved"]
    assert outbox.queued(sink.name) == 0 and store.queued() == 0


async def test_a_body_limit_keeps_the_alert_it_cannot_take_queued_and_lets_the_others_through(rig):
    receiver, store, _outbox, book, deliverer, sink, clock, lines = rig
    receiver.max_body = 1500
    fire(book, store, sink, "big.service", clock.now, summary="x" * 1900)  # over the proxy's limit alone
    fire(book, store, sink, "small.service", clock.now)
    for _ in range(60):
        if "small.service" in receiver.units():
            break
        await rounds(deliverer, sink, clock, 1)
    assert receiver.units() == ["small.service"]
    await rounds(deliverer, sink, clock, 30)
    assert store.queued() == 1 and store.counters() == {}  # the destination's limit: kept, never dropped
    assert any("HTTP 413 (a body limit in front of it" in line for line in lines)
    receiver.max_body = None  # the limit raised
    await rounds(deliverer, sink, clock, 2)
    assert receiver.units() == ["small.service", "big.service"] and store.queued() == 0
