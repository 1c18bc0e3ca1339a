"""The stall story in the TUI (issue 26), by keys: Qwen3 TP4 brought up on demo-vllm, a client streaming,
the 4th rank diverges (the simulated vLLM's `diverged`, switched on like its other faults); the service
pane says STALLED with the reason and names GPU 3, while its health row still reads ready."""

from __future__ import annotations

import asyncio
import contextlib

from pilot_wait import wait_for
from screen_text import screen_text

from console.ui.screens.confirm import ConfirmSwitch
from console.ui.screens.picker import LayoutPicker
from console.ui.widgets.switch_progress import SwitchPanel


async def _stream(url: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/v1/models") as resp:
            model = (await resp.json())["data"][0]["id"]
        body = {"model": model, "prompt": "Tell me a story.", "max_tokens": 100000, "stream": True}
        async with session.post(f"{url}/v1/completions", json=body) as resp:
            async for _ in resp.content:
                pass


async def test_a_diverged_rank_is_stalled_on_the_service_pane_while_health_reads_ready(demo_app, monkeypatch) -> None:
    monkeypatch.setenv("SERVE_CONSOLE_SIM_FAIL", "diverged")
    monkeypatch.setenv("SERVE_CONSOLE_SIM_STALL_AFTER_S", "2")
    app = demo_app()
    client = None
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_host("demo-vllm")
        screen = app.host_screen("demo-vllm")
        assert await wait_for(pilot, lambda: screen.is_mounted and screen.last_view is not None)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LayoutPicker) and "TP4" in screen_text(app))
        await pilot.press("enter")  # TP4, the first layout
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmSwitch) and app.screen.fit_known)
        await pilot.press("y")
        panel = screen.query_one(SwitchPanel)
        assert await wait_for(pilot, lambda: panel.finished and not screen.switching, timeout_s=90)
        assert panel.outcome == "ready", screen_text(app)
        service = app.hosts["demo-vllm"].config.services[0]
        client = asyncio.create_task(_stream(service.url))
        try:
            assert await wait_for(pilot, lambda: "serving STALLED since" in screen_text(app), timeout_s=90), \
                screen_text(app)
            text = screen_text(app)
            assert "GPU 3 idle at 0%" in text and "pending 1 running" in text
            assert "health  ready" in text  # vLLM's /health never notices
        finally:
            client.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await client
