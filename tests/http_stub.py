"""A loopback HTTP server for tests that stand in for an engine or an exporter (aiohttp, port 0)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def http_stub(routes: Mapping[str, Handler]) -> AsyncIterator[int]:
    """Serve GET `routes` (path -> handler) on 127.0.0.1 and a free port, yielded; closed at exit."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
