"""HttpHealthProbe against a real aiohttp server on loopback: refused -> 503 -> 200, and via a forward."""

from __future__ import annotations

import pytest
from aiohttp import web
from ports import free_port

from console.domain.values import Engine
from console.errors import HostError
from console.hosts.endpoints.health import PROBE_USER_AGENT, HttpHealthProbe


class Engineish:
    """/health answers 503 until `ready`; /v1/models answers 200 as soon as HTTP is up (like SGLang)."""

    def __init__(self, *, has_health: bool = True):
        self.ready = False
        self.runner = None
        self.port = free_port()
        self.has_health = has_health
        self.requests: list[tuple[str, str]] = []
        """(path, User-Agent) of every request."""

    async def start(self):
        async def health(request):
            self.requests.append((request.path, request.headers.get("User-Agent", "")))
            if not self.has_health:
                return web.Response(status=404)
            return web.Response(status=200 if self.ready else 503)

        async def models(request):
            self.requests.append((request.path, request.headers.get("User-Agent", "")))
            return web.json_response({"data": []})

        app = web.Application()
        app.router.add_get("/health", health)
        app.router.add_get("/v1/models", models)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self):
        await self.runner.cleanup()


async def test_sglang_sequence_refused_then_starting_then_ready():
    engine = Engineish()
    probe = HttpHealthProbe(f"http://127.0.0.1:{engine.port}", Engine.SGLANG, timeout_s=2)
    try:
        down = await probe.probe()
        assert down.status == "down" and "refused" in (down.error or "")
        await engine.start()
        starting = await probe.probe()
        assert (starting.status, starting.http_status) == ("starting", 503)
        engine.ready = True
        ready = await probe.probe()
        assert (ready.status, ready.http_status) == ("ready", 200)
        assert ready.latency_s is not None and ready.latency_s >= 0
        # only /health, and every request says it is the console's probe
        assert engine.requests == [("/health", PROBE_USER_AGENT)] * 2
        assert PROBE_USER_AGENT.startswith("serve-console/") and PROBE_USER_AGENT.endswith(" (probe)")
    finally:
        await probe.close()
        if engine.runner:
            await engine.stop()


class FakeForward:
    def __init__(self, port=None, error=None):
        self.port, self.error = port, error

    async def local_port(self):
        if self.error:
            raise HostError("gpu-node-1", self.error)
        return self.port


async def test_forwarded_probe_uses_the_local_port_and_reports_a_down_host():
    engine = Engineish()
    await engine.start()
    engine.ready = True
    # the configured URL is the engine's address on the host; only the forward's port is reachable here
    probe = HttpHealthProbe("http://127.0.0.1:1/", Engine.VLLM, forward=FakeForward(engine.port))
    broken = HttpHealthProbe(
        "http://127.0.0.1:30000", Engine.SGLANG, forward=FakeForward(error="connection lost")
    )
    try:
        assert (await probe.probe()).status == "ready"
        sample = await broken.probe()
        assert sample.status == "down" and "connection lost" in (sample.error or "")
    finally:
        await probe.close()
        await broken.close()
        await engine.stop()


async def test_v1_models_is_asked_only_of_a_server_without_health():
    engine = Engineish(has_health=False)
    await engine.start()
    sglang = HttpHealthProbe(f"http://127.0.0.1:{engine.port}", Engine.SGLANG, timeout_s=2)
    openai = HttpHealthProbe(f"http://127.0.0.1:{engine.port}", Engine.OPENAI, timeout_s=2)
    try:
        assert (await sglang.probe()).status == "starting"  # 404 on /health is not ready for SGLang
        assert [path for path, _ in engine.requests] == ["/health"]
        sample = await openai.probe()
        assert (sample.status, sample.models_ok) == ("ready", True)
        assert [path for path, _ in engine.requests] == ["/health", "/health", "/v1/models"]
    finally:
        await sglang.close()
        await openai.close()
        await engine.stop()


def test_bad_urls_are_refused():
    with pytest.raises(ValueError):
        HttpHealthProbe("ftp://x", Engine.SGLANG)
