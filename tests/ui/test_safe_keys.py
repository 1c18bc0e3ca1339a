"""Keys that can take a server down ask first, and Enter never forces (issue 10, items 1, 2, 4, 14)."""

from __future__ import annotations

from fixed_host import fixed_app
from pilot_wait import settle, wait_for
from screen_text import notified, screen_text

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.confirm_unit import ConfirmUnitAction
from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.switch_progress import SwitchPanel


def _record_switches(monkeypatch) -> list[tuple[str, bool]]:
    started: list[tuple[str, bool]] = []
    monkeypatch.setattr(HostScreen, "start_switch", lambda self, layout, force: started.append((layout, force)))
    return started


async def _open_tp4ep2_confirm(pilot) -> None:
    """The issue's keys: `l`, `↓`, `Enter` opens the confirmation of TP4 EP2, which the fit refuses."""
    app = pilot.app
    assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
    await pilot.press("l")
    assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker) and bool(app.screen.fits))
    await pilot.press("down", "enter")
    assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
    assert app.screen.needs_force


async def test_enter_never_forces_a_switch_the_fit_refuses(monkeypatch) -> None:
    started = _record_switches(monkeypatch)
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_tp4ep2_confirm(pilot)
        assert app.focused is not None and app.focused.id == "confirm-no"  # Cancel has the focus
        text = screen_text(app)
        # The dialog names what forcing risks: the running unit stops, the new one is predicted to fail.
        assert "Forcing stops sglang-k26@ep8.service" in text and "kimi-k2.6 stops serving" in text
        await pilot.press("enter")  # the second Enter
        assert await settle(pilot, lambda: not isinstance(app.screen, ConfirmSwitch))
        assert started == []
        await pilot.press("enter")  # the picker again: Enter there opens the confirmation, never more
        assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        await pilot.press("y", "tab", "tab")  # y is refused; Tab cannot reach Force (or a disabled Confirm)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmSwitch) and app.focused.id == "confirm-no" and started == []
        await pilot.press("f")  # the explicit force key
        assert await settle(pilot, lambda: started == [("TP4 EP2", True)])


async def test_a_switch_that_fits_still_starts_with_cancel_focused(host_screen_ready, monkeypatch) -> None:
    started = _record_switches(monkeypatch)
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await host_screen_ready(pilot)
        screen = app.screen
        screen.request_switch("TP8")
        assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        assert app.focused.id == "confirm-no"
        await pilot.press("enter")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen)) and started == []
        screen.request_switch("TP8")
        assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        await pilot.press("y")
        assert await settle(pilot, lambda: started == [("TP8", False)])


async def test_stop_and_restart_ask_naming_the_unit_and_the_outage(host_screen_ready, monkeypatch) -> None:
    app = fixed_app({"demo": "ep8"})
    acted: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        screen = app.screen
        monkeypatch.setattr(screen.host.services, "stop", lambda unit: acted.append(f"stop {unit}"))
        for key, verb, outage in (("S", "Stop", "stops serving: every request fails"),
                                  ("R", "Restart", "stops serving until the engine has loaded again")):
            await pilot.press(key)
            assert await settle(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            text = screen_text(app)
            assert f"{verb} sglang-k26@ep8.service on demo?" in text and outage in text, text
            assert app.focused.id == "confirm-no"
            await pilot.press("enter")  # Cancel
            assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        assert acted == []


async def test_read_only_refuses_stop_and_restart_in_the_tui(host_screen_ready) -> None:
    app = fixed_app({"demo": "ep8"}, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        app.screen._unit_action("stop")  # what `S` would do if its binding were not hidden
        assert await settle(pilot, lambda: any("read-only mode" in n.message for n in notified(app)))
        assert not isinstance(app.screen, ConfirmUnitAction)


def test_help_says_enter_does_not_confirm_and_f_forces() -> None:
    from rich.console import Console

    from console.ui.screens.help import help_table

    console = Console(width=400, record=True)
    console.print(help_table({}, readonly=False))
    rows = {line.split()[1]: line for line in console.export_text().splitlines() if len(line.split()) > 1}
    assert rows["confirm.yes"].split()[0] == "y"  # Enter is not "go ahead" any more
    assert "Enter presses the focused button, which starts on Cancel" in rows["confirm.yes"]
    assert "predicts it will not load" in rows["confirm.force"] and "only key that forces" in rows["confirm.force"]
    assert "asks first" in rows["host.stop"] and "asks first" in rows["host.restart"]
    assert "READY or FAILED" in rows["host.restart"]


async def test_restart_reports_ready_then_a_failed_restart_with_its_card(demo_app, monkeypatch) -> None:
    from sim_fixtures import fake_engine

    app = demo_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_host("demo")
        screen = app.host_screen("demo")
        assert await wait_for(pilot, lambda: screen.is_mounted and app.screen is screen)
        finals: list = []
        finish = screen._switch_finished
        monkeypatch.setattr(screen, "_switch_finished", lambda result: (finals.append(result), finish(result)))
        screen.start_switch("EP8", False)
        assert await wait_for(pilot, lambda: len(finals) == 1 and not screen.switching)
        assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.layout == "EP8")
        panel = screen.query_one(SwitchPanel)
        for attempt in ("ready", "failed"):
            if attempt == "failed":
                fake_engine(monkeypatch, "import sys\nprint('torch.OutOfMemoryError: CUDA out of memory. Tried "
                            "to allocate 2.00 GiB. GPU 0 has a total capacity of 95.00 GiB of which 1.00 GiB "
                            "is free.', flush=True)\nsys.exit(1)\n")
            count = len(finals)
            await pilot.press("R")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            await pilot.press("y")
            assert await wait_for(pilot, lambda n=count: len(finals) > n and panel.finished, timeout_s=60)
            result = finals[-1]
            assert result.extra.get("action") == "restart" and result.outcome == attempt, result
            notes = [n.message for n in notified(app)]
            if attempt == "ready":
                assert "EP8 READY" in notes, notes
            else:
                assert result.failure is not None and result.failure.cls.value == "cuda_oom"
                assert "FAILED" in (panel.query_one("FailureCard").border_title or "")
                assert not any("done" in note for note in notes), notes


async def test_notifications_show_host_text_inert_and_redacted() -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        app.notify("gpu1: start failed: \x1b]52;c;aGk=\x07[bold]\u202eevil api_key=sk-live-1")
        assert await settle(pilot, lambda: any("gpu1: start failed" in n.message for n in notified(app)))
        note = notified(app)[-1]
        assert note.message == "gpu1: start failed: \\x1b]52;c;aGk=\\x07[bold]\\u202eevil api_key=***"
        assert note.markup is False  # `[bold]` from a host is text, not markup


async def test_pane_errors_from_a_host_are_inert(host_screen_ready) -> None:
    from console.ui.widgets.gpu_pane import GpuPane
    from console.ui.widgets.service_pane import ServicePane

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        for pane in (app.screen.query_one(ServicePane), app.screen.query_one(GpuPane)):
            pane._failed("nvidia-smi failed: \x1b[2J\u009b31m[bold]HF_TOKEN=hf_abcdefghijklmnopqrstuvwx")
            assert await settle(pilot, lambda pane=pane: pane.error is not None)
            assert pane.error == "nvidia-smi failed: \\x1b[2J\\x9b31m[bold]HF_TOKEN=***"
        assert "\\x1b[2J" in screen_text(app) and "[bold]HF_TOKEN=***" in screen_text(app)  # markup shown as text
