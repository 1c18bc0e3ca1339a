"""`x` then `g` asks before the explore starts, as every key that takes the service down does: Enter
presses Cancel, `n` cancels, only `y` starts it."""

from __future__ import annotations

import dataclasses

from demo_config import demo_config_on_free_port
from pilot_wait import wait_for
from screen_text import screen_text
from textual.widgets import Input, SelectionList

from console.ui.screens.confirm_unit import ConfirmUnitAction
from console.ui.screens.explore import ExploreScreen


async def test_g_asks_before_an_explore_starts(sim_env) -> None:
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    config = demo_config_on_free_port()
    config = dataclasses.replace(config, hosts=tuple(h for h in config.hosts if h.name == "demo"))
    audit = open_audit(sim_env)
    app = ConsoleApp(open_hosts(config, state_dir=sim_env), config=config, audit=audit, stop_started_units=True)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: app.host_screen("demo") is not None)
            await pilot.press("x")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ExploreScreen))
            explore = app.screen
            picks = explore.query_one(SelectionList)
            assert await wait_for(pilot, lambda: picks.option_count == 4)
            picks.deselect("TP8")
            picks.deselect("PP8")
            explore.query_one("#explore-concurrency", Input).value = "1"
            picks.focus()

            await pilot.press("g")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            text = screen_text(app)
            assert "Explore EP8 on demo?" in text and "down while each one loads" in text
            assert not explore.running
            await pilot.press("enter")  # the focus starts on Cancel
            assert await wait_for(pilot, lambda: app.screen is explore)
            await pilot.pause()
            assert not explore.running

            await pilot.press("g")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            await pilot.press("n")
            assert await wait_for(pilot, lambda: app.screen is explore)
            await pilot.pause()
            assert not explore.running

            await pilot.press("g")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            await pilot.press("y")
            assert await wait_for(pilot, lambda: app.screen is explore and explore.running)
            await pilot.press("escape")  # stops the sweep; the app stops the unit it started on exit
            assert await wait_for(pilot, lambda: not isinstance(app.screen, ExploreScreen))
    finally:
        audit.close()
