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
        # a view taken while the head still warmed up (503) may say alive too: wait for its 200
        assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.group == "alive"
                              and screen.last_view.health is not None and screen.last_view.health.status == "ready")

        worker = app.hosts["demo-b"]
        pid = (await worker.services.state("sglang-ds3@tp16.service")).main_pid
        os.kill(pid, signal.SIGKILL)
        assert await wait_for(pilot, lambda: "DEAD node-rank 1 (demo-b) ranks 8-15" in screen_text(app), timeout_s=10)
        text = screen_text(app)
        assert "health  ready" in text and "phase   FAILED" in text, text  # the head's 200 hides nothing

        app.open_host("demo-b")  # a host that is only a node: its screen opens and says whose node it is
        other = app.host_screen("demo-b")
        assert await wait_for(pilot, lambda: other.is_mounted and other.last_view is not None)
        assert other.sub_title == "deepseek-v3 · node-rank 1 of demo-a"
        assert await wait_for(pilot, lambda: " FAILED " in screen_text(app) and "sglang-ds3@tp16" in screen_text(app))


async def test_a_dead_node_looks_failed_and_fits_at_120_columns(demo_app) -> None:
    """Issue 30, B6: the head's pane over a dead worker is failed (banner, red state, recovery keys), the
    node's row wraps under its label with the cause in full, the GPU pane counts the GPUs of this node,
    and the fleet row says FAILED: dead node within its column."""
    from console.ui.widgets.service_pane import ServicePane

    app = demo_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_host("demo-a")
        screen = app.host_screen("demo-a")
        assert await wait_for(pilot, lambda: screen.is_mounted and screen.last_view is not None)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and "TP16" in screen_text(app))
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        await pilot.press("y")
        panel = screen.query_one(SwitchPanel)
        assert await wait_for(pilot, lambda: panel.finished and not screen.switching, timeout_s=60)
        assert panel.outcome == "ready", screen_text(app)
        assert await wait_for(pilot, lambda: "layout uses 8 of 8 here, 16 over 2 nodes" in screen_text(app))
        assert "uses 16 of 8" not in screen_text(app)

        worker = app.hosts["demo-b"]
        os.kill((await worker.services.state("sglang-ds3@tp16.service")).main_pid, signal.SIGKILL)
        assert await wait_for(pilot, lambda: "signal 9/KILL" in screen_text(app), timeout_s=20), screen_text(app)
        pane = screen.query_one(ServicePane)
        region = pane.region
        rows = [row[region.x: region.x + region.width] for row in
                screen_text(app).splitlines()[region.y: region.y + region.height]]  # fmt: skip
        text = "\n".join(rows)
        assert " FAILED  a node is dead" in text and "R: restart it" in text, text
        assert "DEAD node-rank 1 (demo-b) ranks 8-15:" in text and not any("…" in row for row in rows), text
        assert pane.has_class("-failed")
        drawn = pane.render()
        at = drawn.plain.index("active/running")
        bad = pane.get_component_rich_style("service--bad")
        assert any(span.start <= at < span.end and span.style == bad for span in drawn.spans)  # red, not green
        await pilot.press("escape")  # the fleet: the row says what failed, in its column
        assert await wait_for(pilot, lambda: "FAILED: dead node" in screen_text(app)), screen_text(app)


async def test_a_start_up_phase_does_not_outlive_the_unit() -> None:
    """A worker's last journal phase is CUDA GRAPHS (a node never logs ready); once its unit has ended,
    the pane says FAILED (or STOPPED), not CUDA GRAPHS for ever."""
    import dataclasses

    from fixed_host import fixed_app
    from pilot_wait import settle

    from console.domain.values import Phase, UnitState
    from console.ui.screens.host import HostScreen
    from console.ui.widgets.service_pane import ServicePane

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
        pane = app.screen.query_one(ServicePane)
        pane.set_phase(Phase.CUDA_GRAPHS)
        unit = pane.view.unit
        for active, shown in (("failed", "FAILED"), ("inactive", "STOPPED")):
            pane.show(dataclasses.replace(pane.view, phase=None, death=None,
                                          state=UnitState(unit=unit, active=active, sub="dead")))  # fmt: skip
            assert await settle(pilot, lambda shown=shown: f"phase   {shown}" in screen_text(app)), screen_text(app)
            assert "CUDA GRAPHS" not in screen_text(app)
