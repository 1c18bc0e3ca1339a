"""`b` probes the running layout after asking; `x` explores picked layouts with live progress, a
comparison table and a chart; the picker then shows what was measured. The real app on the simulated
demo host."""

from __future__ import annotations

import dataclasses

import pytest
from demo_config import demo_config_on_free_port
from pilot_wait import wait_for
from screen_text import screen_text

from console.ops.explore.probe_load import ProbeOptions
from console.ui.screens import probe as probe_screen
from console.ui.screens.confirm_unit import ConfirmUnitAction
from console.ui.screens.explore import ExploreScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.screens.probe import ProbeScreen
from console.ui.widgets.switch_progress import SwitchPanel


@pytest.fixture
def kimi_app(sim_env):
    """The console on the demo's Kimi K2.6 host alone (it starts EP8, and stops its units on exit)."""
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    config = demo_config_on_free_port()
    config = dataclasses.replace(config, hosts=tuple(h for h in config.hosts if h.name == "demo"))
    audit = open_audit(sim_env)
    yield ConsoleApp(open_hosts(config, state_dir=sim_env), config=config, audit=audit, demo_start=True,
                     stop_started_units=True)
    audit.close()


async def test_probe_then_explore_then_the_picker_shows_tok_s(kimi_app, monkeypatch) -> None:
    monkeypatch.setattr(probe_screen, "TUI_PROBE", ProbeOptions(concurrency=(1,), num_prompts=2, output_len=8, warmup=0))
    app = kimi_app
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.host_screen("demo") is not None)
        screen = app.host_screen("demo")
        assert await wait_for(pilot, lambda: screen.is_mounted and screen.query_one(SwitchPanel).finished)
        assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.layout == "EP8")

        await pilot.press("b")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProbeScreen))
        assert "production load" in screen_text(app) and not app.screen.results  # it asks first
        await pilot.press("y")
        probing = app.screen
        assert await wait_for(pilot, lambda: len(probing.results) == 1 and not probing.running)
        text = screen_text(app)
        assert "TTFT p50 ms" in text and "done: 1 levels, 0 failed requests" in text
        assert probing.results[0].layout == "EP8" and probing.results[0].summary.completed == 2
        await pilot.press("n")
        assert await wait_for(pilot, lambda: app.screen is screen)

        await pilot.press("x")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ExploreScreen))
        explore = app.screen
        from textual.widgets import Input, SelectionList

        picks = explore.query_one(SelectionList)
        assert await wait_for(pilot, lambda: picks.option_count == 4)
        assert set(picks.selected) == {"TP8", "PP8", "EP8"}  # the predicted OOM starts unchecked
        assert "OOM" in screen_text(app) or "oom" in screen_text(app)
        picks.deselect("PP8")
        explore.query_one("#explore-concurrency", Input).value = "1,2"
        explore.query_one("#explore-output", Input).value = "8"
        picks.focus()
        await pilot.press("g")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))  # it asks first
        await pilot.press("y")
        assert await wait_for(pilot, lambda: explore.running)
        assert await wait_for(pilot, lambda: not explore.running and explore.result is not None, timeout_s=90)
        result = explore.result
        assert [(r.layout, r.outcome) for r in result.layouts] == [("TP8", "measured"), ("EP8", "measured")]
        assert result.best == "EP8" and result.left_running == "EP8"
        text = screen_text(app)
        assert "* measured" in text and "agg c=2" in text and "Pareto" in text and "█" in text
        assert "done: best by throughput, the highest aggregate tok/s at the top concurrency: EP8; running EP8" in text

        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
        await pilot.pause()  # the fits drawn
        rows = {name: next(line for line in screen_text(app).splitlines() if f" {name} " in line and "sglang-k26@" in line)
                for name in ("TP8", "EP8", "PP8")}
        assert "/u " in rows["EP8"] and "@c2" in rows["EP8"] and "/u " in rows["TP8"]
        assert "/u " not in rows["PP8"]
