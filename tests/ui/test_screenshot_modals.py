"""`ctrl+s` saves a screenshot on every screen, the modal ones included (a modal screen's keys stopped
at the modal, so the app's screenshot key never fired there)."""

from __future__ import annotations

import pytest
from fixed_host import fixed_app
from pilot_wait import settle

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.confirm_unit import ConfirmUnitAction
from console.ui.screens.explore import ExploreScreen
from console.ui.screens.help import HelpScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.screens.probe import ProbeScreen

MODALS = {
    "picker": (("l",), LayoutPicker),
    "confirm": (("l", "enter"), ConfirmSwitch),
    "help": (("question_mark",), HelpScreen),
    "probe": (("b",), ProbeScreen),
    "explore": (("x",), ExploreScreen),
    "restart": (("R",), ConfirmUnitAction),
    "stop": (("S",), ConfirmUnitAction),
}


@pytest.mark.parametrize("modal", list(MODALS))
async def test_ctrl_s_saves_a_screenshot_in_every_modal(host_screen_ready, tmp_path, modal) -> None:
    keys, screen_type = MODALS[modal]
    app = fixed_app({"demo": "ep8"}, screenshot_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await host_screen_ready(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        assert await settle(pilot, lambda: isinstance(app.screen, screen_type))
        await pilot.press("ctrl+s")
        assert await settle(pilot, lambda: len(list(tmp_path.glob("*.svg"))) == 1)
        assert isinstance(app.screen, screen_type)  # the modal stays open
