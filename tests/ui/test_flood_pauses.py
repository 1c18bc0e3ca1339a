"""What keeps keys answering under a flood: bounded work per flush, and short garbage-collector passes."""

from __future__ import annotations

import gc

from fixed_host import fixed_app
from pilot_wait import settle

from console.ui.screens.host import HostScreen
from console.ui.widgets.journal_pane import MAX_FLUSH_LINES, JournalPane


async def test_a_backlog_moves_into_the_view_in_bounded_steps_in_order() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        pane = app.screen.query_one(JournalPane)
        view = pane.view
        assert await settle(pilot, lambda: not pane._pending)
        before = view.line_count
        count = min(pane.line_cap, MAX_FLUSH_LINES + 1000)
        for i in range(count):  # one burst, as a reconnect's backlog arrives
            pane.queue_line(f"backlog line {i}", "burst.service", None, None)
        pane.flush()
        assert view.line_count - before == MAX_FLUSH_LINES or view.line_count == view.line_cap
        assert pane._pending  # the rest waits for the next frame
        assert await settle(pilot, lambda: not pane._pending)
        texts = [line.text for line in view.lines if line.text.startswith("backlog line ")]
        assert texts == [f"backlog line {i}" for i in range(count - len(texts), count)]
        assert texts[-1] == f"backlog line {count - 1}"


async def test_startup_objects_are_frozen_while_the_app_runs() -> None:
    thresholds = gc.get_threshold()
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: gc.get_freeze_count() > 0)
        assert gc.get_threshold()[0] >= app.gc_pauses.YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0  # an app that ended leaves nothing frozen behind
    assert gc.get_threshold() == thresholds


def test_a_freeze_that_comes_after_restore_freezes_nothing() -> None:
    # The app's freeze runs on a timer; an app that ends before it fires must not leave a frozen process.
    from console.ui.gc_pauses import GcPauses

    pauses, thresholds = GcPauses(), gc.get_threshold()
    pauses.restore()
    pauses.freeze_startup()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
