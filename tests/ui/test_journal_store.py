"""The journal view's storage: journal-time order across units, probe lines folded, bookkeeping intact."""

from __future__ import annotations

import random

from console.domain.values import Finding, FindingClass
from console.hosts.endpoints.health import PROBE_USER_AGENT
from console.ui.widgets.journal_lines import LineFilter
from console.ui.widgets.journal_store import JournalStore

PROBE = 'INFO:     127.0.0.1:5123 - "GET /health HTTP/1.1" 200 OK'
AGENT_PROBE = f'INFO:     127.0.0.1:5123 - "GET /health HTTP/1.1" 200 OK "{PROBE_USER_AGENT}"'
OOM = Finding(cls=FindingClass.CUDA_OOM, line="oom", summary="CUDA OOM", ts=130.0)


def texts(store: JournalStore) -> list[str]:
    return [store.line_by_seq(s).text for s in store.visible_seqs()]


def check(store: JournalStore) -> None:
    seqs = [line.seq for line in store.lines]
    assert seqs == list(range(store.next_seq - len(seqs), store.next_seq))
    assert store.findings == [line.seq for line in store.lines if line.finding is not None]
    assert store.probe_count == sum(line.probe for line in store.lines)
    if store.rows is not None:
        assert store.rows == [line.seq for line in store.lines if store.shows(line)]


def test_stop_lines_that_arrive_after_the_oom_are_shown_before_it():
    store = JournalStore(100)
    store.append([("── ep8 ──", "ep8", None, None), ("Loading", "ep8", 90.0, None)])
    store.append([("── tp4ep2 ──", "tp4ep2", None, None), ("Load weight begin", "tp4ep2", 120.0, None),
                  ("torch.OutOfMemoryError", "tp4ep2", 130.0, OOM)])
    store.cursor_seq = store.lines[-1].seq  # the OOM line is selected
    done = store.append([("── ep8 ──", "ep8", None, None), ("Stopping EP8", "ep8", 100.0, None),
                         ("Stopped EP8", "ep8", 101.0, None), ("Started EP8", "ep8", 140.0, None)])
    assert done.reordered
    assert texts(store) == ["── ep8 ──", "Loading", "Stopping EP8", "Stopped EP8", "── tp4ep2 ──",
                            "Load weight begin", "torch.OutOfMemoryError", "── ep8 ──", "Started EP8"]
    assert store.line_by_seq(store.cursor_seq).text == "torch.OutOfMemoryError"  # the selection stays
    check(store)


def test_lines_in_order_are_appended_without_moving_anything():
    store = JournalStore(100)
    assert not store.append([("a", "u", 1.0, None), ("b", "u", 1.0, None)]).reordered
    assert not store.append([("c", "u", 2.0, None)]).reordered
    assert texts(store) == ["a", "b", "c"]


def test_the_consoles_probe_lines_are_folded_and_counted():
    store = JournalStore(100)
    store.append([("ready", "u", 1.0, None)])
    assert store.rows is None  # nothing folded yet: no row list to keep
    store.append([(PROBE, "u", 2.0, None), ("decode batch", "u", 3.0, None), (AGENT_PROBE, "u", 4.0, None),
                  ('INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "u", 5.0, None)])
    assert store.hidden_probes == 2
    assert texts(store) == ["ready", "decode batch", 'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK']
    store.set_show_probes(True)
    assert store.hidden_probes == 0 and store.row_count == 5 and store.rows is None
    store.set_show_probes(False)
    store.set_filter(LineFilter.parse("batch|GET"))
    assert texts(store) == ["decode batch"]  # a filter does not bring folded probes back
    check(store)


def test_random_batches_keep_the_bookkeeping_in_step():
    rng = random.Random(11)
    store = JournalStore(300)
    t = 0.0
    for _ in range(400):
        batch = []
        for _ in range(rng.randint(1, 40)):
            t += rng.random()
            ts = None if rng.random() < 0.05 else (t - rng.random() * 30 if rng.random() < 0.1 else t)
            text = PROBE if rng.random() < 0.3 else f"line {rng.randint(0, 999)}"
            batch.append((text, "u", ts, OOM if rng.random() < 0.05 else None))
        store.append(batch)
        if rng.random() < 0.1:
            store.set_show_probes(rng.random() < 0.5)
        if rng.random() < 0.1:
            store.set_filter(rng.choice([None, LineFilter.parse("class:oom"), LineFilter.parse("line 1")]))
        check(store)
        stamps = [line.ts for line in store.lines[-200:] if line.ts is not None]
        assert stamps == sorted(stamps)
