"""The snapshot tests' steps: wait for a screen to be drawn, fill the GPU history, replay a failure card."""

from __future__ import annotations

import json

from fixed_host import DATA, EP8_USED, loading_series
from waiting import settle as settle_until

from console.hosts.gpus.nvidia_smi import GpuHistory
from console.ops.switch.events import event_from_json, result_from_json
from console.ui.messages import SwitchNews
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.switch_progress import SwitchPanel


async def settle(pilot, predicate=lambda: True, timeout_s: float = 30.0) -> bool:
    """Until `predicate()` holds (at most `timeout_s`), then until the app is idle: the screen is drawn
    before its snapshot. Whether the predicate held."""
    held = await settle_until(pilot, predicate, timeout_s=timeout_s)
    await pilot.pause()
    return held


async def main_screen_ready(pilot) -> None:
    app = pilot.app
    await settle(pilot, lambda: app.screen.query("#journal-view") and app.screen.last_view is not None)
    with_history(app)
    await settle(pilot)


async def failure_card_ready(pilot) -> None:
    """The recorded events of a forced TP4 EP2 switch, replayed into the host screen."""
    events = [json.loads(line) for line in (DATA / "switch_tp4ep2_events.jsonl").read_text().splitlines()]
    await main_screen_ready(pilot)
    screen = pilot.app.screen
    panel = screen.query_one(SwitchPanel)
    screen.switching = True
    panel.begin("demo", "kimi-k2.6", "TP4 EP2", True, await screen.layouts_that_fit(exclude="TP4 EP2"))
    journal = screen.query_one("#journal-pane")
    for event in events[:-1]:
        screen.post_message(SwitchNews("demo", event_from_json(event)))
        if event.get("step") == "start" and not event.get("rollback"):
            # Let the journal pane read the failing unit's journal before the rollback moves it on.
            # (a fixed "failed" host's journal may hold fewer lines: a bounded wait, as before)
            await settle(pilot, lambda: journal.unit == "sglang-k26@tp4ep2.service" and journal.received > 150,
                         timeout_s=3)
    screen.post_message(SwitchNews("demo", result_from_json(events[-1])))
    await settle(pilot, lambda: panel.finished)
    # A rollback that failed may leave the pane on TP4 EP2 (tests/ui/test_screen_fit.py): a bounded wait.
    await settle(pilot, lambda: screen.query_one("#journal-pane").unit == "sglang-k26@ep8.service", timeout_s=3)
    # The same screen however long the replay took on a loaded machine: the toast gone (as after its
    # timeout), the journal following its tail.
    pilot.app.clear_notifications()
    screen.query_one("#journal-view").set_follow(True)
    await settle(pilot)


def with_history(app) -> None:
    """A loading curve in the sparklines, the same every run."""
    pane = app.screen.query_one(GpuPane)
    pane.history = GpuHistory(history_s=600, max_points=600)
    for snap in loading_series(EP8_USED):
        pane.ingest(snap)
