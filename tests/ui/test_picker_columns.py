"""The picker shows every figure in full (headroom, verdict) at 120 columns and wider."""

from __future__ import annotations

import re

import pytest
from fixed_host import fixed_app
from pilot_wait import settle
from screen_text import screen_text

from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker


@pytest.mark.parametrize("size", [(120, 40), (140, 45), (200, 50)])
async def test_picker_rows_show_full_figures(host_screen_ready, size: tuple[int, int]) -> None:
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=size) as pilot:
        await host_screen_ready(pilot)
        await pilot.press("l")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
        await pilot.pause()  # the fits drawn
        text = screen_text(app)
        rows = {name: next(line for line in text.splitlines() if f" {name} " in line and ".service" in line)
                for name in ("TP8", "PP8", "EP8", "TP4 EP2")}
        assert "73.22 GiB" in rows["TP8"] and "+2.48 GiB" in rows["TP8"] and " fits " in rows["TP8"]
        assert "+0.63 GiB" in rows["PP8"] and " fits " in rows["PP8"]
        assert "▶ running" in rows["EP8"] and "+3.56 GiB" in rows["EP8"] and " fits " in rows["EP8"]
        assert "141.69 GiB" in rows["TP4 EP2"] and "-65.45 GiB" in rows["TP4 EP2"] and " OOM " in rows["TP4 EP2"]
        assert "sglang-k26@tp4ep2.service" in rows["TP4 EP2"]


async def test_picker_shows_predicted_tok_s_beside_the_fit() -> None:
    """Per user at c=1 and aggregate at c=64, marked `~` (predicted); a layout fit refuses is not ranked."""
    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(160, 45)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
        await pilot.press("l")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
        assert await settle(pilot, lambda: re.search(r" ~\d+\.\d ~\d+ ", screen_text(app)),
                            what="a predicted tok/s drawn")
        text = screen_text(app)
        assert "~c1 c64" in text and "~ predicted" in text
        rows = {name: next(line for line in text.splitlines() if f" {name} " in line and ".service" in line)
                for name in ("TP8", "PP8", "EP8", "TP4 EP2")}
        for name in ("TP8", "PP8", "EP8"):
            assert re.search(r" ~\d+\.\d ~\d+ ", rows[name]), rows[name]
        assert not re.search(r" ~\d+\.\d ~\d+ ", rows["TP4 EP2"])
