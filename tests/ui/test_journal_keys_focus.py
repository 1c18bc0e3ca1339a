"""The journal's keys work on the host screen whatever has focus, and typed text reaches the filter.

Keys are sent the way a terminal delivers a burst (tmux send-keys, a paste): all queued before the
first is handled, with no waiting in between.
"""

from __future__ import annotations

from fixed_host import fixed_app
from pilot_wait import settle
from textual import events
from textual.app import App
from textual.widgets import Input

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.journal_view import JournalView
from console.ui.widgets.switch_progress import SwitchPanel


def burst(app: App, *keys: str) -> None:
    """Queue every key at once, as the terminal driver does when they arrive in one read."""
    for key in keys:
        name = {"/": "slash", ":": "colon"}.get(key, key)
        event = events.Key(name, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)


async def host_screen_with_journal(pilot) -> tuple[HostScreen, JournalView]:
    app = pilot.app
    assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
    view = app.screen.query_one(JournalView)
    assert await settle(pilot, lambda: view.line_count > 50 and any(line.finding for line in view.lines))
    return app.screen, view


async def assert_filter_by_burst(pilot, screen: HostScreen, view: JournalView, copied: list[str]) -> None:
    burst(pilot.app, "/", *"class:oom", "enter")
    assert await settle(pilot, lambda: view.line_filter is not None)
    assert view.line_filter.text == "class:oom"
    assert pilot.app.screen is screen  # `l` and Enter were text, not the picker and its choice
    assert not copied  # `c` was text, not copy
    assert all(view.line_at_row(r).finding is not None for r in range(view.row_count))
    await pilot.press("ctrl+l")
    assert view.line_filter is None


async def test_burst_after_focus_is_lost_reaches_the_filter() -> None:
    app = fixed_app({"demo": "failed"})
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        screen, view = await host_screen_with_journal(pilot)
        screen.set_focus(None)
        await assert_filter_by_burst(pilot, screen, view, copied)
        screen.set_focus(None)  # every journal key answers without focus in the journal
        await pilot.press("e")
        assert view.cursor_line is not None and view.cursor_line.finding is not None
        await pilot.press("c")
        assert copied and copied[-1] == view.cursor_line.text


async def test_burst_after_switch_panel_and_modals_reaches_the_filter() -> None:
    app = fixed_app({"demo": "failed"})
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        screen, view = await host_screen_with_journal(pilot)
        screen.query_one(SwitchPanel).begin("demo", "kimi-k2.6", "TP4 EP2", True)  # the panel appears
        await pilot.press("l")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
        await pilot.press("enter")
        assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch))
        await pilot.press("escape")  # confirmation closes, then the picker
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker))
        await pilot.press("escape")
        assert await settle(pilot, lambda: app.screen is screen)
        await assert_filter_by_burst(pilot, screen, view, copied)


async def test_text_input_keeps_journal_keys() -> None:
    app = fixed_app({"demo": "failed"})
    async with app.run_test(size=(120, 40)) as pilot:
        screen, view = await host_screen_with_journal(pilot)
        burst(app, "/", *"e/n/G")  # `e`, `/`, `n`, `G` are text while the input has focus
        find = screen.query_one("#journal-find", Input)
        assert await settle(pilot, lambda: find.value == "e/n/G")
        assert view.cursor_seq is None and isinstance(screen.focused, Input)
        await pilot.press("escape")
        assert await settle(pilot, lambda: screen.focused is view)
        assert view.line_filter is None
