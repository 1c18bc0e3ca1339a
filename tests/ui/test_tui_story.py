"""The Kimi K2.6 story, driven by keys in the real app on the simulated demo host.

EP8 comes up; the operator opens the picker, chooses TP4 EP2, is told it will not fit, forces it;
the OOM card shows the figures (672.00 MiB tried, on the GPU that died), the journal highlights the
OOM line, and the rollback brings EP8 back to READY.
"""

from __future__ import annotations

from pilot_wait import wait_for
from screen_text import screen_text
from waiting import settle

from console.ui.messages import SwitchNews
from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.journal_view import JournalView
from console.ui.widgets.switch_progress import SwitchPanel


async def test_forced_oom_shows_card_highlight_and_rollback(demo_app) -> None:
    seen: list[object] = []
    app = demo_app(demo_start=True)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.host_screen("demo")
        assert screen is not None
        assert await wait_for(pilot, lambda: screen.is_mounted and screen.query_one(SwitchPanel).finished)
        assert screen.query_one(SwitchPanel).outcome == "ready"  # act one: EP8 up
        assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.layout == "EP8")

        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and "OOM" in screen_text(app))
        text = screen_text(app)
        assert "▶ running" in text and "TP4 EP2" in text and "141.69 GiB" in text
        await pilot.press("down", "down", "down", "enter")  # TP4 EP2 is the last of four
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        text = screen_text(app)
        assert "will NOT load" in text and "sglang-k26@ep8.service" in text and "sglang-k26@tp4ep2.service" in text
        await pilot.press("y")  # a predicted OOM refuses the plain confirm...
        await pilot.pause()
        assert isinstance(app.screen, ConfirmSwitch)
        await pilot.press("f")  # ...and needs the explicit force

        panel = screen.query_one(SwitchPanel)
        assert await wait_for(pilot, lambda: panel.finished and not screen.switching, timeout_s=45)

        results = [m.final.to_json() for m in seen if isinstance(m, SwitchNews) and m.final is not None]
        assert [r["outcome"] for r in results] == ["ready", "failed"]
        failed = results[-1]
        assert failed["layout"] == "TP4 EP2" and failed["forced"] is True
        failure = failed["failure"]
        assert failure["kind"] == "cuda_oom" and failure["tried_bytes"] == 672 * 2**20
        gpu = failure["gpu"]
        assert failed["rollback"]["layout"] == "EP8" and failed["rollback"]["outcome"] == "ready"
        events = [m.event.to_json() for m in seen if isinstance(m, SwitchNews) and m.final is None]
        assert any(e["event"] == "step" and e["step"] == "rollback" and e["rollback"] is True for e in events)

        text = screen_text(app)
        assert "FAILED · CUDA OOM" in text
        assert f"CUDA OOM · GPU {gpu} · tried 672 MiB · " in text  # the card's one-line headline
        assert "ROLLBACK" in text and "rollback EP8 READY" in text
        assert "fits      TP8 (fits), PP8 (fits), EP8 (fits)" in text

        # The journal kept the OOM line; the class filter brings it into view, highlighted with its marker.
        await pilot.press("slash")
        await pilot.press(*"class:oom", "enter")
        view = screen.query_one(JournalView)
        assert view.row_count >= 1
        line = view.line_at_row(view.row_count - 1)
        assert line is not None and line.finding is not None and "672.00 MiB" in line.text
        assert await settle(pilot, lambda: "tried 672.00 MiB" in screen_text(app))
        text = screen_text(app)
        assert f" OOM {failure['rank']} GPU{gpu}" in text and "tried 672.00 MiB" in text and "OutOfMemoryError" in text

        # Back to every line: nothing was lost to the filter.
        await pilot.press("ctrl+l")
        assert view.row_count == view.line_count - view.hidden_probes  # the console's probes stay folded (h)
        await pilot.pause()
