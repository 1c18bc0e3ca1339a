"""Keys from the one registry, the palette, --readonly, remaps, and hosts that go down or flood."""

from __future__ import annotations

import asyncio
import time

from fixed_host import fixed_app
from pilot_wait import settle
from screen_text import notified, screen_text
from textual.command import CommandPalette

from console.ui.keys import ACTIONS, bindings
from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.help import HelpScreen
from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_view import JournalView
from console.ui.widgets.service_pane import ServicePane


def test_registry_ids_are_unique_and_feed_bindings() -> None:
    ids = [a.id for a in ACTIONS]
    assert len(ids) == len(set(ids))
    for scope in {a.scope for a in ACTIONS}:
        assert {b.id for b in bindings(scope)} == {a.id for a in ACTIONS if a.scope == scope}
        assert all(b.tooltip for b in bindings(scope))


async def test_help_lists_every_action_with_remapped_key() -> None:
    app = fixed_app({"demo": "ep8"}, keys=(("journal.next_finding", "j"),))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("question_mark")
        assert await settle(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = screen_text(app)
        box = app.screen.query_one("#help-box")
        while box.scroll_y < box.max_scroll_y:  # a long help scrolls; read all of it
            box.scroll_page_down(animate=False)
            await pilot.pause()
            text += screen_text(app)
        for action in ACTIONS:
            assert action.id in text
        row = next(line for line in text.splitlines() if "journal.next_finding" in line)
        assert row.split()[1] == "j"  # the remapped key, not the default "e"
        await pilot.press("escape")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))


async def test_remapped_key_runs_the_action() -> None:
    app = fixed_app({"demo": "failed"}, keys=(("journal.next_finding", "j"),))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        view = app.screen.query_one(JournalView)
        assert await settle(pilot, lambda: view.line_count > 50 and any(line.finding for line in view.lines))
        await pilot.press("j")
        assert await settle(pilot, lambda: view.cursor_line is not None and view.cursor_line.finding is not None)
        assert screen is app.screen


async def test_readonly_hides_and_refuses_changes(host_screen_ready) -> None:
    app = fixed_app({"demo": "ep8"}, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)

        def footer() -> str:
            return [line for line in screen_text(app).splitlines() if line.strip()][-1]

        assert await settle(pilot, lambda: "Layouts" in footer())
        assert "Restart" not in footer()
        notes_before = len(notified(app))
        await pilot.press("R")  # hidden and refused: nothing happens, nothing is sent to the host
        await pilot.pause()
        assert len(notified(app)) == notes_before
        await pilot.press("l")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
        assert "read-only: view only" in screen_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LayoutPicker)  # no confirmation, no switch
        screen = app.host_screen("demo")
        screen.request_switch("EP8")  # the palette's path refuses too
        assert await settle(pilot, lambda: any("read-only" in n.message for n in notified(app)))
        assert not isinstance(app.screen, ConfirmSwitch)
        from console.ui.palette import ConsoleCommands

        provider = ConsoleCommands(app.screen)
        names = [name for name, _, _ in provider._commands()]
        assert names and not any(n.startswith("layout: switch") or n == "service: restart" for n in names)


async def test_palette_switch_command_asks_for_confirmation(host_screen_ready) -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        await pilot.press("ctrl+p")
        assert await settle(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"layout: switch to PP8 on demo")
        assert await settle(pilot, lambda: "layout: switch to PP8 on demo" in screen_text(app))
        await pilot.press("enter")
        assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        text = screen_text(app)
        assert "to PP8" in text and "sglang-k26@pp8.service" in text and "FITS" in text
        await pilot.press("n")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))


async def test_down_host_is_marked_stale_and_nothing_crashes() -> None:
    offset = [0.0]
    app = fixed_app({"demo": "ep8", "gpu-node-3": "down"}, clock=lambda: time.time() + offset[0])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one("#fleet-table")
        assert await settle(pilot, lambda: len(table.summaries) == 2)
        row = screen_text(app)
        assert "DOWN" in row and "STALE" in row
        app.open_host("gpu-node-3")  # never reached: says so, shows no made-up state
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and "no data yet" in screen_text(app))
        assert "does not answer" in screen_text(app) and "connection refused" in screen_text(app)
        await pilot.press("l")  # the picker still opens; the fit comes from the config
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker))
        await pilot.press("escape")

        app.open_host("demo")  # up, then it goes down: the last data stays, marked stale with its age
        screen = app.host_screen("demo")
        assert await settle(pilot, lambda: app.screen is screen and screen.last_view is not None)
        screen.host.services.down = True
        screen.host.gpus.snapshot = None
        offset[0] = 42.0
        screen.query_one(ServicePane).poll()
        screen.query_one(GpuPane).poll()
        assert await settle(pilot, lambda: "STALE, data 42s old" in screen_text(app))
        text = screen_text(app)
        assert "sglang-k26@ep8.service" in text  # the last known unit is still shown
        assert text.count("STALE") >= 2  # the service and the GPU panes
        assert app.is_running  # no exception reached the app


async def test_filter_search_and_copy_by_keys() -> None:
    app = fixed_app({"demo": "failed"})
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        view = app.screen.query_one(JournalView)
        assert await settle(pilot, lambda: view.line_count > 50)
        total = view.line_count
        await pilot.press("slash", *"class:oom", "enter")
        assert view.row_count >= 1 and view.line_count == total
        await pilot.press("ctrl+l", "s", *"Load weight", "enter")
        assert view.cursor_line is not None and "Load weight" in view.cursor_line.text
        first = view.cursor_seq
        await pilot.press("n")
        assert view.cursor_seq != first
        await pilot.press("N")
        assert view.cursor_seq == first
        await pilot.press("c")
        assert copied and "Load weight" in copied[-1]
        await pilot.press("slash", *"([", "enter")  # a bad regex is a notification, not a crash
        assert await settle(pilot, lambda: any("bad regex" in n.message for n in notified(app)))
        await pilot.press("escape")


async def test_flood_keeps_memory_bounded_and_keys_answer() -> None:
    """A unit writing as fast as it can: storage stays at the cap and a key still gets through."""
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        pane = app.screen.query_one("#journal-pane")
        view = pane.view

        async def flood() -> None:
            for k in range(60):
                for i in range(1000):
                    pane.queue_line(f"[TP{i % 8}] decode batch {k * 1000 + i}", "flood.service", None, None)
                await asyncio.sleep(0)  # deliberate: a yield between batches, so the key lands mid-flood

        task = asyncio.create_task(flood())
        await pilot.press("p")  # per-process view toggles while the flood runs
        await task
        assert await settle(pilot, lambda: view.lines and view.lines[-1].text.endswith("59999"))
        assert view.line_count <= pane.line_cap
        assert app.screen.query_one("#gpu-pane").show_processes


async def test_fleet_enter_opens_host_and_escape_returns() -> None:
    app = fixed_app({"demo": "ep8", "gpu-node-2": "failed"})
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one("#fleet-table")
        assert await settle(pilot, lambda: len(table.summaries) == 2)
        await pilot.press("down", "enter")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.host.name == "gpu-node-2")
        assert await settle(pilot, lambda: "FAILED" in screen_text(app) and "exit-code" in screen_text(app))
        await pilot.press("escape")
        assert await settle(pilot, lambda: not isinstance(app.screen, HostScreen))
        await pilot.press("T")  # themes cycle from the files in themes/
        assert app.theme != "dark" and app.theme in app.theme_names


async def test_worker_error_becomes_a_notification() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))

        async def boom() -> None:
            raise RuntimeError("unexpected")

        app.screen.run_worker(boom(), name="probe", exit_on_error=False)
        assert await settle(pilot, lambda: any("probe stopped: unexpected" in n.message for n in notified(app)))
        assert app.is_running


async def test_tab_shows_the_next_service(host_screen_ready) -> None:
    import dataclasses

    import fixed_host

    from console.ui.app import ConsoleApp

    config = fixed_host.fixed_config(["demo"])
    host_cfg = config.hosts[0]
    second = dataclasses.replace(host_cfg.services[0], name="second-svc")
    host_cfg = dataclasses.replace(host_cfg, services=(host_cfg.services[0], second))
    config = dataclasses.replace(config, hosts=(host_cfg,))
    host = fixed_host.demo_like_host(host_cfg, scenario="ep8")
    app = ConsoleApp([host], config=config, clock=fixed_host.frozen_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        await pilot.press("tab")
        assert await settle(pilot, lambda: "service second-svc" in screen_text(app))
        assert app.screen.service.name == "second-svc" and "second-svc" in screen_text(app).splitlines()[0]
