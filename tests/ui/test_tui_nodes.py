"""The two-host story in the TUI (issue 20): DeepSeek-V3 TP16 brought up over demo-a and demo-b by keys,
a worker's engine on demo-b killed, and the service pane names the dead node at once while the head's
health still reads ready; demo-b's own screen shows what it runs as a node."""

from __future__ import annotations

import os
import signal

from pilot_wait import wait_for
from screen_text import screen_text

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.switch_progress import SwitchPanel


async def test_a_killed_worker_is_a_dead_node_on_the_heads_screen_while_it_answers_200(demo_app) -> None:
    app = demo_app()
    async with app.run_test(size=(140, 44)) as pilot:
        app.open_host("demo-a")
        screen = app.host_screen("demo-a")
        assert await wait_for(pilot, lambda: screen.is_mounted and screen.last_view is not None)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and "TP16" in screen_text(app))
        await pilot.press("enter")  # TP16, the first layout
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        await pilot.press("y")
        panel = screen.query_one(SwitchPanel)
        assert await wait_for(pilot, lambda: panel.finished and not screen.switching, timeout_s=60)
        assert panel.outcome == "ready", screen_text(app)
        lines = {step[1]: step[2] for step in panel.steps}  # each node's phases on its own line
        assert lines["phases demo-a"].endswith("ready") and "loading weights" in lines["phases demo-b"]
        assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.group == "alive")

        worker = app.hosts["demo-b"]
        pid = (await worker.services.state("sglang-ds3@tp16.service")).main_pid
        os.kill(pid, signal.SIGKILL)
        assert await wait_for(pilot, lambda: "DEAD node-rank 1 (demo-b) ranks 8-15" in screen_text(app), timeout_s=10)
        text = screen_text(app)
        assert "health  ready" in text and "phase   FAILED" in text  # the head's 200 hides nothing

        app.open_host("demo-b")  # a host that is only a node: its screen opens and says whose node it is
        other = app.host_screen("demo-b")
        assert await wait_for(pilot, lambda: other.is_mounted and other.last_view is not None)
        assert other.sub_title == "deepseek-v3 · node-rank 1 of demo-a"
        assert await wait_for(pilot, lambda: " FAILED " in screen_text(app) and "sglang-ds3@tp16" in screen_text(app))
