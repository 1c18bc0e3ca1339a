"""The journal's Line-API view: bounded storage, filters that keep lines, findings, follow mode."""

from __future__ import annotations

import re

from textual.app import App, ComposeResult

from console.domain.values import Finding, FindingClass, OomFigures
from console.ui.widgets.journal_lines import LineFilter, marker_for
from console.ui.widgets.journal_view import JournalView

OOM = Finding(
    FindingClass.CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB.",
    "CUDA OOM", rank="TP2",
    oom=OomFigures(gpu=2, tried_bytes=672 * 2**20, total_bytes=None, free_bytes=int(136.94 * 2**20),
                   in_use_bytes=None),
)


class ViewApp(App[None]):
    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def compose(self) -> ComposeResult:
        yield JournalView(line_cap=self.cap)


def lines(n: int, start: int = 0) -> list[tuple[str, str, float | None, Finding | None]]:
    return [(f"line {i}", "u.service", None, OOM if i % 100 == 7 else None) for i in range(start, start + n)]


async def test_storage_is_bounded_and_keeps_newest() -> None:
    app = ViewApp(cap=1000)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        for k in range(20):
            view.append_batch(lines(5000, k * 5000))
        await pilot.pause()
        assert view.line_count == 1000
        assert view.lines[-1].text == "line 99999"
        assert view.lines[0].text == "line 99000"
        assert view.dropped == 99000
        assert view.follow


async def test_filter_keeps_lines_and_findings_jump() -> None:
    app = ViewApp(cap=10_000)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        view.append_batch(lines(1000))
        view.set_filter(LineFilter.parse("class:oom"))
        assert view.row_count == 10 and view.line_count == 1000
        view.append_batch(lines(100, 1000))
        assert view.row_count == 11
        view.set_filter(None)
        assert view.row_count == 1100
        view.set_filter(LineFilter.parse(r"line 5\d\d$"))
        assert view.row_count == 100
        view.set_filter(None)
        first = view.next_finding()
        second = view.next_finding()
        assert first is not None and second is not None and second.seq > first.seq
        back = view.next_finding(backwards=True)
        assert back is not None and back.seq == first.seq
        assert not view.follow  # jumping away from the end pauses follow
        await pilot.pause()


async def test_follow_pauses_when_scrolled_up_and_resumes_at_end() -> None:
    app = ViewApp(cap=10_000)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        view.focus()
        view.append_batch(lines(500))
        await pilot.pause()
        assert view.follow and view.scroll_y == view.max_scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert not view.follow
        y = view.scroll_y
        view.append_batch(lines(50, 500))
        await pilot.pause()
        assert view.scroll_y == y  # no jumping while the user reads
        await pilot.press("end")
        await pilot.pause()
        assert view.follow
        view.append_batch(lines(50, 550))
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y


async def test_search_highlight_and_match_steps() -> None:
    app = ViewApp(cap=10_000)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        view.append_batch(lines(300))
        view.set_search(re.compile(r"line 2\d$"))
        hit = view.next_match()
        assert hit is not None and re.search(r"line 2\d$", hit.text)
        await pilot.pause()


def test_marker_names_rank_gpu_and_figures() -> None:
    text = marker_for(OOM)
    assert "OOM" in text and "TP2" in text and "GPU2" in text and "672.00 MiB" in text and "136.94 MiB" in text


def test_control_characters_are_replaced() -> None:
    from console.ui.widgets.journal_lines import clean_text

    assert clean_text("a\x1b[31mb\tc") == "a\\x1b[31mb      c"  # the escape shown, the tab expanded
    assert clean_text("\u009b2J \u202eevil\nnext") == "\\x9b2J \\u202eevil\\nnext"  # C1, bidi, newline
    assert clean_text("api_key='sk-1' HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz") == "api_key='***' HF_TOKEN=***"
    assert len(clean_text("x" * 10_000)) < 4100


async def test_click_selects_a_line() -> None:
    app = ViewApp(cap=10_000)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        view.append_batch(lines(10))
        await pilot.pause()
        await pilot.click(JournalView, offset=(5, 3))
        assert view.cursor_line is not None and view.cursor_line.text == "line 3"


def test_sparkline_covers_the_kept_history_in_time_buckets() -> None:
    from console.ui.widgets.gpu_pane import spark_fractions, sparkline

    points = [(1000.0 + t, 1000 * t) for t in range(0, 100)]  # a ramp over 100 s
    fractions = spark_fractions(points, 100_000, 10, now=1100.0)
    assert len(fractions) == 10 and fractions == sorted(fractions) and fractions[-1] == 0.99
    line = sparkline(fractions, 10)
    assert fractions[0] == 0.09 and line[0] in "▁▂" and line[-1] == "█"
    gappy = spark_fractions([(0.0, 50_000), (90.0, 100_000)], 100_000, 10, now=100.0)
    assert gappy[:9] == [0.5] * 9 and gappy[9] == 1.0  # gaps repeat the last value


async def test_random_operations_keep_storage_consistent() -> None:
    """Batches, filters, searches and steps in a seeded random order: the bookkeeping always agrees."""
    import random

    rng = random.Random(20260526)
    app = ViewApp(cap=700)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        sent = 0
        for _ in range(300):
            op = rng.random()
            if op < 0.5:
                n = rng.randint(1, 400)
                view.append_batch(lines(n, sent))
                sent += n
            elif op < 0.65:
                view.set_filter(rng.choice([None, LineFilter.parse("class:oom"), LineFilter.parse(r"line \d*7$")]))
            elif op < 0.75:
                view.set_search(rng.choice([None, re.compile(r"line 1\d")]))
            elif op < 0.9:
                view.next_finding(backwards=rng.random() < 0.5)
            else:
                view.next_match(backwards=rng.random() < 0.5)
            stored = [line.seq for line in view.lines]
            assert len(stored) == min(sent, 700) and stored == list(range(sent - len(stored), sent))
            assert view.dropped == sent - len(stored)
            assert view.store.findings == [s for s in stored if s % 100 == 7]
            if view.line_filter is None:
                assert view.row_count == view.line_count
            else:
                assert view.store.rows == [line.seq for line in view.lines if view.line_filter.matches(line)]
            if view.cursor_seq is not None:
                assert view.cursor_seq >= stored[0]
        await pilot.pause()


async def test_a_long_line_scrolls_a_quarter_of_the_view_per_arrow() -> None:
    app = ViewApp(cap=100)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(JournalView)
        view.append_batch([("x" * 400, "u.service", None, None)])
        view.focus()
        await pilot.pause()
        await pilot.press("right")
        await pilot.pause()
        step = view.scroll_x
        assert step >= max(8, view.scrollable_content_region.width // 4) - 1 and step > 1
        await pilot.press("right", "left")
        await pilot.pause()
        assert view.scroll_x == step


def test_every_finding_class_has_its_own_marker_and_style() -> None:
    from console.domain.values import FindingClass
    from console.ui.widgets.journal_lines import CLASS_STYLE

    assert set(CLASS_STYLE) == set(FindingClass)
    assert {style for style, _ in CLASS_STYLE.values()} <= {"oom", "nccl", "traceback", "error"}
    labels = [label for _, label in CLASS_STYLE.values()]
    assert len(labels) == len(set(labels))  # each class reads differently in the journal
