"""The first ten minutes: screenshots that say where, a palette of the console's own commands, themes in
the help's order, probe lines folded with a toggle and a count, and a filter hint that names traceback."""

from __future__ import annotations

from fixed_host import fixed_app, gpu_pane_with_data
from pilot_wait import settle
from screen_text import notified, screen_text

from console.ui.keys import BY_ID
from console.ui.screens.host import HostScreen
from console.ui.widgets.journal_view import JournalView


async def test_ctrl_s_saves_an_svg_in_the_screenshot_dir_and_says_where(tmp_path) -> None:
    shots = tmp_path / "shots"
    app = fixed_app({"demo": "ep8"}, screenshot_dir=shots)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("ctrl+s")
        assert await settle(pilot, lambda: list(shots.glob("*.svg")))
        (svg,) = shots.glob("*.svg")
        assert svg.read_text().lstrip().startswith("<svg")
        assert any(f"screenshot saved to {svg}" in str(n.message) for n in notified(app))


async def test_a_screenshot_dir_that_cannot_be_made_is_said_not_silent(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    app = fixed_app({"demo": "ep8"}, screenshot_dir=blocker / "shots")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        app.action_save_screenshot()
        await pilot.pause()
        (note,) = [n for n in notified(app) if "screenshot" in str(n.message)]
        assert "screenshot not saved" in str(note.message) and note.severity == "error"


async def test_the_palette_shows_the_consoles_commands_without_textuals_duplicates() -> None:
    from textual.command import CommandPalette

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))

        async def palette(query: str, shows: str) -> str:
            """The palette's screen once its search for `query` shows `shows`, and the search is over."""
            await pilot.press("ctrl+p")
            assert await settle(pilot, lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*query)
            assert await settle(pilot, lambda: shows in screen_text(app))
            await pilot.pause()
            text = screen_text(app)
            await pilot.press("escape")
            assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
            return text

        quits = await palette("quit", "app: quit")
        assert "app: quit" in quits and "Quit the application" not in quits  # Textual's second Quit
        themes = await palette("theme", "theme: high-contrast")
        assert "theme: light" in themes and "theme: high-contrast" in themes
        assert "Change theme" not in themes and "textual-dark" not in themes  # its picker of 24 more
        assert "app: screenshot" in await palette("screenshot", "app: screenshot")


async def test_t_cycles_themes_in_the_order_the_help_gives() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        seen = [app.theme]
        for _ in range(3):
            await pilot.press("T")
            await pilot.pause()
            seen.append(app.theme)
    assert seen == ["dark", "light", "high-contrast", "dark"]
    assert "(dark, light, high-contrast)" in BY_ID["app.theme"].tooltip


async def test_probe_lines_are_folded_with_a_toggle_and_a_count() -> None:
    probe = 'INFO:     127.0.0.1:40312 - "GET /health HTTP/1.1" 200 OK'
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.query(JournalView))
        pane = app.screen.query_one("#journal-pane")
        view = pane.query_one(JournalView)
        assert await settle(pilot, lambda: view.line_count > 20)
        shown = view.row_count
        view.append_batch([(probe, "u", 9e9, None)] * 3)
        pane._update_title()
        await pilot.pause()
        assert view.row_count == shown and view.hidden_probes == 3
        assert "3 probe lines hidden (h shows)" in pane.border_title
        await pilot.press("h")
        await pilot.pause()
        assert view.row_count == shown + 3 and "probe lines shown (h hides)" in pane.border_title
        await pilot.press("h")
        await pilot.pause()
        assert view.row_count == shown


async def test_the_filter_hint_names_class_traceback() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.query(JournalView))
        await pilot.press("slash")
        await pilot.pause()
        find = app.screen.query_one("#journal-find")
        assert "class:traceback" in find.placeholder
        assert "class:traceback" in BY_ID["journal.filter"].tooltip


async def test_gpu_colours_follow_the_layouts_expected_memory_and_flag_the_unusual() -> None:
    from console.domain.fit.gpu_health import OK, WARN

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await gpu_pane_with_data(pilot)
        pane.set_gpus_in_use(8, 78_500)  # EP8 at 80 %: what the layout reserves, so all green
        assert [v.level for v in pane.verdicts()] == [OK] * 8 and not pane.border_subtitle
        pane.set_gpus_in_use(4, 78_500)  # a layout of 4 GPUs: the other four hold memory they should not
        await pilot.pause()
        assert [v.level for v in pane.verdicts()] == [OK] * 4 + [WARN] * 4
        assert pane.border_subtitle.startswith("GPU 4: ") and "does not use" in pane.border_subtitle
        assert "util %" in str(pane.border_title)


async def test_processes_take_the_sparklines_place_and_the_pane_keeps_its_height() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await gpu_pane_with_data(pilot)
        height = pane.size.height
        await pilot.press("p")
        await pilot.pause()
        assert pane.show_processes and pane.size.height == height
        text = screen_text(app)
        assert all(f"pid {4242 + i} python" in text for i in range(8))


async def test_a_rollback_starts_a_fresh_shard_bar_and_a_finished_switch_shows_none() -> None:
    from textual.widgets import ProgressBar

    from console.domain.values import Phase
    from console.ops.switch.events import ProgressEvent, StepEvent, SwitchResult
    from console.ui.widgets.switch_progress import SwitchPanel

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        panel = app.screen.query_one(SwitchPanel)
        panel.begin("demo", "kimi-k2.6", "TP4 EP2", True)
        panel.on_switch_event(ProgressEvent(layout="TP4 EP2", elapsed_s=15.0, phase=Phase.LOADING_WEIGHTS,
                                            progress=41 / 64, detail="loading weights 41/64"))
        bar = panel.query_one(ProgressBar)
        assert bar.progress > 60
        panel.on_switch_event(StepEvent(layout="EP8", elapsed_s=0.0, rollback=True, step="rollback",
                                        detail="rolling back to EP8"))
        assert bar.progress == 0  # not the failed layout's 41/64 under the rollback's steps
        panel.finish(SwitchResult(host="demo", service="kimi-k2.6", layout="TP4 EP2", outcome="failed"))
        await pilot.pause()
        assert not panel.query_one("#switch-progress-row").display
        assert app.screen.has_class("-switch-shown")  # a failed switch keeps the room on a short screen
        panel.begin("demo", "kimi-k2.6", "EP8", False)
        panel.finish(SwitchResult(host="demo", service="kimi-k2.6", layout="EP8", outcome="ready"))
        assert not app.screen.has_class("-switch-shown")  # a ready one folds: the top panes come back


async def test_the_footer_does_not_offer_esc_fleet_while_the_filter_has_focus() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.query(JournalView))

        def footer() -> str:
            return screen_text(app).splitlines()[-1]

        assert await settle(pilot, lambda: "Fleet" in footer())
        await pilot.press("slash")
        assert await settle(pilot, lambda: "Fleet" not in footer())
        await pilot.press("escape")  # closes the filter, and the screen's Esc is back
        assert await settle(pilot, lambda: "Fleet" in footer())
        assert isinstance(app.screen, HostScreen)
