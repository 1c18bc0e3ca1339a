"""The failure card fits the screen: at 120x40 the screen gets no scrollbar; at 100x30 and 80x24 the
service and GPU panes stay in view and the card shrinks into a panel that scrolls; the step list keeps
its words; the force dialog wraps to the terminal with Cancel in view; a failed rollback gets its own line
on the card. Snapshots of the card and the force dialog at each size."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fixed_host import DATA, fixed_app
from screen_text import LastReadyAudit, screen_text
from snapshot_steps import failure_card_ready, main_screen_ready, settle

from console.ops.switch.events import SwitchResult, result_from_json
from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.failure_card import FailureCard
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.service_pane import ServicePane
from console.ui.widgets.switch_progress import SwitchPanel

SIZES = [(80, 24), (100, 30), (120, 40)]
IDS = ["80x24", "100x30", "120x40"]


async def force_dialog_ready(pilot) -> None:
    """The picker, TP4 EP2 (predicted OOM), Enter: the confirmation that needs `f`."""
    await main_screen_ready(pilot)
    await pilot.press("l")
    await settle(pilot, lambda: isinstance(pilot.app.screen, LayoutPicker) and pilot.app.screen.fits)
    await pilot.press("down", "down", "down", "enter")
    await settle(pilot, lambda: isinstance(pilot.app.screen, ConfirmSwitch) and pilot.app.screen.fit_known)


async def rollback_failed_card_ready(pilot) -> None:
    """The same switch, ended with a rollback that failed too: the card's tallest common form."""
    await failure_card_ready(pilot)
    events = [json.loads(line) for line in (DATA / "switch_tp4ep2_events.jsonl").read_text().splitlines()]
    pilot.app.screen.query_one(SwitchPanel).finish(failed_both_ways(result_from_json(events[-1])))
    await settle(pilot)


async def tall_card_ready(pilot) -> None:
    """The same switch, its cause with what the engine was doing and what followed: two rows more."""
    from console.domain.values import Finding, FindingClass

    await failure_card_ready(pilot)
    events = [json.loads(line) for line in (DATA / "switch_tp4ep2_events.jsonl").read_text().splitlines()]
    result = result_from_json(events[-1])
    after = Finding(cls=FindingClass.UNIT_FAILED, line="", summary="the unit failed (exit-code)")
    failure = dataclasses.replace(result.failure, context=FindingClass.CUDA_GRAPH, consequences=(after,))
    pilot.app.screen.query_one(SwitchPanel).finish(dataclasses.replace(result, failure=failure))
    await settle(pilot)


def failed_both_ways(result: SwitchResult) -> SwitchResult:
    back = SwitchResult(host="demo", service="kimi-k2.6", layout="EP8", outcome="timeout",
                        reason="not ready within 900 s")
    return dataclasses.replace(result, rollback=back)


def inside(region, width: int, height: int) -> bool:
    return region.width > 0 and region.height > 0 and region.right <= width and region.bottom <= height


@pytest.mark.parametrize(("scenario", "ready"), [("ep8", failure_card_ready), ("ep8", tall_card_ready),
                                                 ("failed", rollback_failed_card_ready)],
                         ids=["card", "tall-card", "rollback-failed"])
@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_the_card_leaves_the_panes_in_view_and_the_screen_unscrolled(size, scenario, ready) -> None:
    width, height = size
    # the service pane's tallest: its "last ready" row, and with nothing running its FAILED banner
    app = fixed_app({"demo": scenario}, audit=LastReadyAudit())
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        screen = app.screen
        assert screen.max_scroll_y == 0 and not screen.show_vertical_scrollbar
        for pane in (screen.query_one(ServicePane), screen.query_one(GpuPane)):
            assert pane.display and inside(pane.region, width, height) and pane.region.height >= 5, pane
        panel, card = screen.query_one(SwitchPanel), screen.query_one(FailureCard)
        assert inside(panel.region, width, height)
        assert card.display and card.region.height > 0  # its headline in view; the rest scrolls in the panel
        assert card.region.y < panel.region.bottom and panel.virtual_size.height >= card.outer_size.height
        assert screen.query_one("#switch-steps").region.width >= 40  # the steps keep their words


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_the_force_dialog_wraps_to_the_terminal_with_cancel_in_view(size) -> None:
    width, height = size
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=size) as pilot:
        await force_dialog_ready(pilot)
        box = app.screen.query_one("#confirm-box")
        assert inside(box.region, width, height)
        for button in ("#confirm-no", "#confirm-force"):
            assert inside(app.screen.query_one(button).region, width, height), button


async def test_a_failed_rollback_gets_its_own_line_on_the_card() -> None:
    events = [json.loads(line) for line in (DATA / "switch_tp4ep2_events.jsonl").read_text().splitlines()]
    failed = failed_both_ways(result_from_json(events[-1]))
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        await main_screen_ready(pilot)
        card = app.screen.query_one(FailureCard)
        app.screen.query_one(SwitchPanel).remove_class("-hidden")
        card.show_failure(failed, [])
        await settle(pilot)
        region = card.region
        rows = [row[region.x : region.right] for row in screen_text(app).splitlines()[region.y : region.bottom]]
        assert any(row.strip("┃│ ").startswith("rollback  EP8 TIMEOUT: not ready within 900 s") for row in rows), rows


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_card_snapshot(snap_compare, size) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=size, run_before=failure_card_ready)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_force_dialog_snapshot(snap_compare, size) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=size, run_before=force_dialog_ready)


async def test_at_80x24_the_footer_keeps_quit_and_help_and_v_reaches_the_verdict() -> None:
    """Issue 30, D13: at 80x24 the footer lost `q Quit` and `? Help`, and after a rollback the panel's
    verdict sat below the card with no key to scroll to it."""
    from pilot_wait import settle as settle_until

    app = fixed_app({"demo": "failed"}, audit=LastReadyAudit())
    async with app.run_test(size=(80, 24)) as pilot:
        await rollback_failed_card_ready(pilot)
        footer = screen_text(app).splitlines()[-1]
        assert "q Quit" in footer and "? Help" in footer, footer
        verdict = "FAILED TP4 EP2 · rollback EP8 TIMEOUT"
        panel = app.screen.query_one(SwitchPanel)
        assert await settle_until(pilot, lambda: "v: verdict" in str(panel.border_subtitle))
        assert verdict not in screen_text(app)  # under the card, out of the panel's view
        await pilot.press("v")
        assert await settle_until(pilot, lambda: verdict in screen_text(app)), screen_text(app)
        await pilot.press("v")  # and back to the card
        assert await settle_until(pilot, lambda: "FAILED · CUDA OOM" in screen_text(app)), screen_text(app)


async def test_a_terminal_made_narrow_keeps_quit_and_help_in_the_footer() -> None:
    from pilot_wait import settle as settle_until

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(140, 40)) as pilot:
        await main_screen_ready(pilot)
        assert "e Next finding" in screen_text(app).splitlines()[-1]
        await pilot.resize_terminal(80, 24)
        assert await settle_until(pilot, lambda: "q Quit  ? Help" in screen_text(app).splitlines()[-1]), (
            screen_text(app).splitlines()[-1])
