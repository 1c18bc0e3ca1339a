"""After an engine dies: the FAILED banner says which key recovers, the picker marks the layout `failed`
(not `▶ running`), and `R` restarts the failed unit (after asking), as `systemctl restart` can, once
the failed unit's evidence is kept."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

from demo_config import demo_config_on_free_port
from pilot_wait import wait_for
from screen_text import pane_rows, screen_text

from console.ui.screens.confirm_unit import ConfirmUnitAction
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.switch_progress import SwitchPanel


async def test_r_restarts_a_failed_unit_and_the_picker_says_failed(sim_env) -> None:
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    config = demo_config_on_free_port()
    config = dataclasses.replace(config, hosts=tuple(h for h in config.hosts if h.name == "demo"))
    audit = open_audit(sim_env)
    app = ConsoleApp(open_hosts(config, state_dir=sim_env), config=config, audit=audit, demo_start=True,
                     stop_started_units=True)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: app.host_screen("demo") is not None)
            screen = app.host_screen("demo")
            panel = screen.query_one(SwitchPanel)
            assert await wait_for(pilot, lambda: screen.is_mounted and panel.finished and panel.outcome == "ready")
            unit = screen.service.unit_for(screen.service.layout("EP8"))
            os.kill((await screen.host.services.state(unit)).main_pid, signal.SIGKILL)  # the engine dies
            assert await wait_for(pilot, lambda: screen.last_view is not None and screen.last_view.state is not None
                                  and screen.last_view.state.is_failed)
            assert await wait_for(pilot, lambda: any("R: restart it · l: another layout" in row
                                                     for row in pane_rows(app)))
            assert any(" FAILED " in row for row in pane_rows(app))

            await pilot.press("l")
            assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and app.screen.fits)
            row = next(line for line in screen_text(app).splitlines() if " EP8 " in line and "sglang-k26@" in line)
            assert "✗ failed" in row and "▶ running" not in row
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: app.screen is screen)

            await pilot.press("R")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmUnitAction))
            assert f"Restart {unit} on demo?" in screen_text(app)
            await pilot.press("y")
            assert await wait_for(pilot, lambda: screen.switching)
            assert await wait_for(pilot, lambda: not screen.switching and panel.finished, timeout_s=60)
            assert panel.outcome == "ready"
            assert (await screen.host.services.state(unit)).is_running
            # Ready means a token: the panel gives the port, HTTP and first-token times, in order.
            said = [what for _, what, _, _ in panel.steps]
            assert said.index("port-open") < said.index("http-ready") < said.index("first-token"), said
            assert " token " in str(panel.query_one("#switch-status").render())
            # The failed unit's evidence was kept before the restart, and the panel says where.
            said_evidence = [detail for _, what, detail, _ in panel.steps if what == "evidence"]
            assert said_evidence[0].startswith(f"keeping the evidence of {unit} on demo failed"), said_evidence
            kept = [detail for detail in said_evidence if detail.startswith("evidence: ")]
            assert kept and kept[0].startswith(f"evidence: {sim_env / 'evidence'}"), panel.steps
            folder = Path(kept[0].split(": ", 1)[1].split(" (", 1)[0])
            manifest = json.loads((folder / "manifest.json").read_text())
            assert manifest["trigger"] == "restart" and manifest["kind"] == "unit_failed"
    finally:
        audit.close()
