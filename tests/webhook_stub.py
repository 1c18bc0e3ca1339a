"""A webhook (or Alertmanager) stand-in on loopback for the watch daemon's tests: it records what it takes and
answers what the test sets: a status (a redirect with its Location), or a 500 to a body holding a word."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

from aiohttp import web


class Receiver:
    """A webhook stand-in: answers `status` (with `location` on a redirect), or 500 to a body holding `poison`."""

    def __init__(self) -> None:
        self.status = 200
        self.location = ""
        self.poison: str | None = None
        self.max_body: int | None = None
        """Bodies longer than this are answered 413 (a proxy's limit)."""
        self.bodies: list = []
        self.attempts = 0
        self._posted = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.attempts += 1
        text = await request.text()
        if self.poison is not None and self.poison in text:
            return web.Response(status=500, text="internal error")
        if self.max_body is not None and len(text) > self.max_body:
            return web.Response(status=413, text="request entity too large")
        if self.status != 200:
            headers = {"Location": self.location} if self.location else {}
            return web.Response(status=self.status, text=f"answer {self.status}", headers=headers)
        self.bodies.append(json.loads(text))
        self._posted.set()
        return web.Response(text="ok")

    def alerts(self) -> list[dict]:
        """Every alert taken, in order (a webhook body's `alerts`, or an Alertmanager POST's list)."""
        return [a for body in self.bodies for a in (body["alerts"] if isinstance(body, dict) else body)]

    def units(self) -> list[str]:
        return [a["labels"].get("unit", "") for a in self.alerts()]

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 60.0, what: str = "a POST") -> None:
        """Until `predicate` holds after a POST it took (a guard against hanging, not a pace)."""
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self._posted.clear()
                await self._posted.wait()


@contextlib.asynccontextmanager
async def serving(receiver: Receiver, path: str = "/hook") -> AsyncIterator[str]:
    """Serve `receiver` on 127.0.0.1 and a free port (at `path` and at Alertmanager's `/api/v2/alerts`);
    yields the URL of `path`."""
    app = web.Application()
    app.router.add_post(path, receiver.handle)
    if path != "/api/v2/alerts":
        app.router.add_post("/api/v2/alerts", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}{path}"
    finally:
        await runner.cleanup()
