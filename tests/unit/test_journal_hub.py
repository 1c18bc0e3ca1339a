"""The journal hub: one stream per unit, shared; late readers replay exactly what follows their cursor."""

from __future__ import annotations

import contextlib

import pytest
from journal_fakes import FakeJournal, take
from waiting import await_for

from console.domain.values import Engine, FindingClass, JournalEntry, Phase
from console.hosts.journal_hub import JournalHub

SEED_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. GPU 2 has a total "
            "capacity of 94.97 GiB of which 136.94 MiB is free.")


@pytest.fixture
def journal() -> FakeJournal:
    return FakeJournal()


async def test_two_readers_share_one_stream_and_a_late_one_replays_after_its_cursor(journal) -> None:
    hub = JournalHub(lambda: journal)
    for i in range(5):
        journal.add(f"line {i}")
    pane = hub.subscribe("u.service", engine=Engine.SGLANG, lines=100)
    seen = await take(pane, 5)
    assert [r.entry.message for r in seen] == [f"line {i}" for i in range(5)]
    cursor = seen[2].entry.cursor
    watcher = hub.subscribe("u.service", engine=Engine.SGLANG, after_cursor=cursor)
    journal.add("line 5")
    assert [r.entry.message for r in await take(watcher, 3)] == ["line 3", "line 4", "line 5"]
    assert [r.entry.message for r in await take(pane, 1)] == ["line 5"]
    assert journal.most_open == 1 and hub.open_streams == 1
    await watcher.aclose()
    await pane.aclose()
    # the last reader left: the channel closed
    await await_for(lambda: journal.open_now == 0 and hub.open_streams == 0, "the hub's channel to close")


async def test_each_line_is_triaged_once_for_every_reader(journal, monkeypatch) -> None:
    from console.domain.triage import triager as triage

    calls = []
    real_feed = triage.Triager.feed
    monkeypatch.setattr(triage.Triager, "feed",
                        lambda self, line, ts=None, systemd=None: calls.append(line) or real_feed(self, line, ts, systemd))
    hub = JournalHub(lambda: journal)
    journal.add("start")
    a = hub.subscribe("u.service", engine=Engine.SGLANG, lines=10)
    await take(a, 1)
    b = hub.subscribe("u.service", engine=Engine.SGLANG, lines=10)
    await take(b, 1)
    journal.add("[2026-05-26 00:06:20 TP2] " + SEED_OOM)
    (ra,), (rb,) = await take(a, 1), await take(b, 1)
    assert ra is rb and ra.findings[0].cls is FindingClass.CUDA_OOM
    assert calls.count(ra.entry.message) == 1
    assert ra.phase is not None and ra.phase.phase is Phase.FAILED  # the fatal line ends the start
    await hub.close()


async def test_a_new_start_names_a_failure_that_recurs(journal) -> None:
    hub = JournalHub(lambda: journal)
    pane = hub.subscribe("u.service", engine=Engine.SGLANG, lines=10)
    journal.add(SEED_OOM)
    (first,) = await take(pane, 1)
    assert first.findings
    journal.add("again")
    (marker,) = await take(pane, 1)
    watcher = hub.subscribe("u.service", engine=Engine.SGLANG, after_cursor=marker.entry.cursor, new_start=True)
    journal.add(SEED_OOM)
    (second,) = await take(watcher, 1)
    assert second.findings and second.findings[0].cls is FindingClass.CUDA_OOM
    await hub.close()


async def test_a_cursor_the_buffer_does_not_hold_gets_a_stream_of_its_own(journal, monkeypatch) -> None:
    from console.hosts import journal_hub

    monkeypatch.setattr(journal_hub, "REPLAY_ENTRIES", 4)
    monkeypatch.setattr(journal_hub, "CATCH_UP_S", 0.1)
    hub = JournalHub(lambda: journal)
    for i in range(10):
        journal.add(f"line {i}")
    pane = hub.subscribe("u.service", engine=Engine.SGLANG, lines=None)
    await take(pane, 10)
    late = hub.subscribe("u.service", engine=Engine.SGLANG, after_cursor="c1")  # older than the buffer
    assert [r.entry.message for r in await take(late, 3)] == ["line 2", "line 3", "line 4"]
    assert journal.opened == 2  # nothing lost: it streamed alone
    await late.aclose()
    await hub.close()


async def test_a_failed_stream_reaches_every_reader(journal) -> None:
    class Broken(FakeJournal):
        async def journal(self, unit, **kwargs):
            yield JournalEntry(ts=0.0, unit=unit, message="one", cursor="c0")
            raise OSError("journalctl -u u.service failed: host gone")

    hub = JournalHub(lambda: Broken())
    stream = hub.subscribe("u.service", engine=Engine.SGLANG, lines=10)
    with pytest.raises(OSError, match="host gone"):
        async with contextlib.aclosing(stream):
            async for _read in stream:
                pass
