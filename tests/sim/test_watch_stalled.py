"""`serve-console watch` raises ServeStalled (critical) on a stalled engine and resolves it once tokens move,
posted to a real Alertmanager (tests/alertmanager.py); the simulated vLLM's every rank spins in a
collective (`--fail spin`) for SERVE_CONSOLE_SIM_STALL_FOR_S seconds, its /health 200 throughout."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import aiohttp
import pytest
from alertmanager import alertmanager, alertmanager_session  # noqa: F401 (fixtures)
from sim_fixtures import free_port, stalling_host, until_ready
from watch_harness import Watch, until

from console.domain.alerts import STALLED

pytestmark = pytest.mark.slow


async def _stream(url: str, tokens: list[str]) -> None:
    payload = {"model": "Qwen/Qwen3-30B-A3B", "prompt": "Hello", "max_tokens": 100000, "stream": True}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v1/completions", json=payload) as resp:
        async for line in resp.content:
            tokens.append(line.decode())


async def test_a_stall_raises_serve_stalled_and_resolves_once_tokens_move(sim_hosts, alertmanager, tmp_path,  # noqa: F811
                                                                           monkeypatch) -> None:
    server, _capture = alertmanager
    monkeypatch.setenv("SERVE_CONSOLE_SIM_STALL_AFTER_S", "2")
    monkeypatch.setenv("SERVE_CONSOLE_SIM_STALL_FOR_S", "25")
    cfg = stalling_host(free_port(), "spin")
    service = dataclasses.replace(cfg.services[0], stall_after_s=4.0, canary=False)
    cfg = dataclasses.replace(cfg, name="stall-am", services=(service,))
    host = sim_hosts(cfg)
    unit = service.unit_for(service.layouts[0])
    watch = Watch(host, tmp_path / "audit.sqlite3", server.url, _capture.url)
    await host.services.start(unit)
    await until_ready(host, service)
    tokens: list[str] = []
    request = asyncio.create_task(_stream(service.url, tokens))
    watch.start()
    try:
        found = await until(lambda: server.alerts(alertname=STALLED, host=cfg.name), timeout_s=60,
                            what="ServeStalled in Alertmanager")
        alert = found[0]
        assert alert["labels"]["severity"] == "critical" and alert["labels"]["unit"] == unit
        notes = alert["annotations"]
        assert "is stalled: no progress for" in notes["summary"] and "1 running" in notes["summary"]
        assert "all ranks look alike" in notes["ranks"]
        seen = len(tokens)
        await until(lambda: not server.alerts(alertname=STALLED, host=cfg.name), timeout_s=90,
                    what="ServeStalled to resolve once tokens move")
        assert len(tokens) > seen, "\n".join(watch.lines)  # it resolved because the stream moved again
        assert any(line.startswith(f"RESOLVED {STALLED}") for line in watch.lines), watch.lines
    finally:
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
        await watch.stop()
        await host.services.stop(unit)
