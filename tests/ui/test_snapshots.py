"""Snapshots at 120x40 of the main screen, the picker, the failure card, the fleet and each theme; at 100x30
and 200x60 of the main screen, the card, the picker, help and processes; the selected OOM line per theme.

The app is the real one, on fixed-data hosts (recorded journals, fixed GPU samples, a frozen
clock), so every run draws the same screen.
"""

from __future__ import annotations

import pytest
from fixed_host import fixed_app
from snapshot_steps import failure_card_ready, main_screen_ready, settle

from console.ui.screens.picker import LayoutPicker

SIZE = (120, 40)


def test_main_screen(snap_compare) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=SIZE, run_before=main_screen_ready)


@pytest.mark.parametrize("theme", ["light", "high-contrast"])
def test_main_screen_themes(snap_compare, theme: str) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}, theme=theme), terminal_size=SIZE, run_before=main_screen_ready)


def test_picker(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await main_screen_ready(pilot)
        await pilot.press("l")
        await settle(pilot, lambda: isinstance(pilot.app.screen, LayoutPicker) and pilot.app.screen.fits)

    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=SIZE, run_before=run_before)


def test_failure_card(snap_compare) -> None:
    """The recorded events of a forced TP4 EP2 switch, replayed into the host screen."""
    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=SIZE, run_before=failure_card_ready)


def test_fleet_overview(snap_compare) -> None:
    app = fixed_app({"demo": "ep8", "gpu-node-2": "failed", "gpu-node-3": "down"})

    async def run_before(pilot) -> None:
        table = pilot.app.screen.query_one("#fleet-table")
        await settle(pilot, lambda: len(table.summaries) == 3)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_failed_service_and_dimmed_gpus(snap_compare) -> None:
    """TP4 EP2 died: the service pane says FAILED in colour and words; GPUs 4-7 (unused by it) are dim."""

    async def run_before(pilot) -> None:
        app = pilot.app
        await settle(pilot, lambda: app.screen.query("#journal-view") and app.screen.last_view is not None)
        await pilot.press("p")  # per-process memory, on demand
        await settle(pilot)

    assert snap_compare(fixed_app({"demo": "failed"}), terminal_size=SIZE, run_before=run_before)


# -- the layout at the sizes operators use: 100x30 (a laptop split), 200x60 (a wide monitor) -------------
LAYOUT_SIZES = [(100, 30), (200, 60)]
SIZE_IDS = ["100x30", "200x60"]


async def picker_ready(pilot) -> None:
    await main_screen_ready(pilot)
    await pilot.press("l")
    await settle(pilot, lambda: isinstance(pilot.app.screen, LayoutPicker) and pilot.app.screen.fits)


async def help_ready(pilot) -> None:
    from console.ui.screens.help import HelpScreen

    await main_screen_ready(pilot)
    await pilot.press("question_mark")
    await settle(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))


async def processes_ready(pilot) -> None:
    await main_screen_ready(pilot)
    await pilot.press("p")
    await settle(pilot)


async def oom_line_selected(pilot) -> None:
    """The card's switch, then `e` onto the OOM line: the selection over red text must stay readable."""
    await failure_card_ready(pilot)
    await pilot.press("e")
    await settle(pilot)


@pytest.mark.parametrize(
    "ready",
    [main_screen_ready, failure_card_ready, picker_ready, help_ready, processes_ready],
    ids=["main", "card", "picker", "help", "processes"],
)
@pytest.mark.parametrize("size", LAYOUT_SIZES, ids=SIZE_IDS)
def test_layout_holds(snap_compare, size, ready) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}), terminal_size=size, run_before=ready)


@pytest.mark.parametrize("theme", ["dark", "light", "high-contrast"])
def test_selected_oom_line_is_readable(snap_compare, theme: str) -> None:
    assert snap_compare(fixed_app({"demo": "ep8"}, theme=theme), terminal_size=(100, 30), run_before=oom_line_selected)
