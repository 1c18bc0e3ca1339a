"""The confirmation shows the real fit even when chosen before the picker's fits arrive; the running
layout reads as a restart of that layout."""

from __future__ import annotations

from fixed_host import fixed_app
from pilot_wait import settle
from screen_text import screen_text

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker


async def open_confirm_before_fits(pilot, monkeypatch, rows_down: int) -> str:
    app = pilot.app
    assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
    monkeypatch.setattr(LayoutPicker, "load_fits", lambda self: None)  # the picker's fits never arrive
    await pilot.press("l")
    assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker))
    assert not app.screen.fits
    await pilot.press(*["down"] * rows_down, "enter")
    assert await settle(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
    await pilot.pause()  # the verdict drawn
    return screen_text(app)


async def test_running_layout_reads_as_restart_with_its_fit(monkeypatch) -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        text = await open_confirm_before_fits(pilot, monkeypatch, 0)  # the cursor starts on EP8
        assert "Restart EP8 on demo?" in text
        assert "This restarts sglang-k26@ep8.service" in text
        assert "from EP8 to EP8" not in text and "fit: unknown" not in text
        assert "fit: FITS  8 GPUs, weights 72.15 GiB/GPU, headroom +3.56 GiB" in text
        assert "Restart (y)" in text
        await pilot.press("n")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker))


async def test_other_layout_chosen_before_fits_shows_its_fit(monkeypatch) -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        text = await open_confirm_before_fits(pilot, monkeypatch, 1)  # EP8 is the third row, TP4 EP2 the fourth
        assert "Switch kimi-k2.6 on demo from EP8 to TP4 EP2." in text
        assert "fit: OOM" in text and "will NOT load" in text and "fit: unknown" not in text
