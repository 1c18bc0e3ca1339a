"""Connections that have not shown the cookie yet: a deadline and a cap (slowloris).

aiohttp reads a request's headers for as long as a client takes to send them, and keeps every such
connection: 1,040 requests sending a header line every 5 s, without the token, held 1,040 descriptors and
the console stopped answering under a 1024-file limit. Here a connection has `HEADER_TIMEOUT_S` to present
the session cookie (or the token) in a request, else it is closed; at most `MAX_UNADMITTED` such
connections are open at once, and one more closes the oldest (a browser with the token gets in at once;
an attacker holds no more than the cap). A connection that showed the cookie is not timed here: its
websocket lives as long as its session.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

#: Seconds a new connection has to send a request that the access gate admits.
HEADER_TIMEOUT_S = 10.0
#: Connections at once that have not been admitted yet.
MAX_UNADMITTED = 64


class ConnectionGuard:
    """The connections not admitted yet, oldest first, each with its deadline."""

    def __init__(
        self, *, header_timeout_s: float = HEADER_TIMEOUT_S, max_unadmitted: int = MAX_UNADMITTED
    ) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_unadmitted = max_unadmitted
        self._waiting: dict[asyncio.BaseTransport, asyncio.TimerHandle] = {}

    @property
    def unadmitted(self) -> int:
        return len(self._waiting)

    def opened(self, transport: asyncio.BaseTransport) -> None:
        while len(self._waiting) >= self.max_unadmitted:
            self._drop(next(iter(self._waiting)))
        loop = asyncio.get_running_loop()
        self._waiting[transport] = loop.call_later(self.header_timeout_s, self._drop, transport)

    def admitted(self, transport: asyncio.BaseTransport | None) -> None:
        """The access gate let a request of this connection through: no deadline any more."""
        handle = self._waiting.pop(transport, None) if transport is not None else None
        if handle is not None:
            handle.cancel()

    def closed(self, transport: asyncio.BaseTransport) -> None:
        self.admitted(transport)

    def _drop(self, transport: asyncio.BaseTransport) -> None:
        handle = self._waiting.pop(transport, None)
        if handle is not None:
            handle.cancel()
        transport.abort()  # no lingering: the descriptor is freed now


class _GuardedProtocol(asyncio.Protocol):
    """aiohttp's request handler for one connection, with the guard told when it opens and closes."""

    def __init__(self, inner: Any, guard: ConnectionGuard) -> None:
        self._inner, self._guard = inner, guard
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._guard.opened(transport)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._guard.closed(self._transport)
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site, each connection under the guard."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, guard: ConnectionGuard) -> None:
        super().__init__(runner, host, port)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # the runner's bookkeeping, without TCPSite's own listener
        server = self._runner.server
        assert server is not None
        guard = self.guard
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _GuardedProtocol(server(), guard), self._host, self._port,
            backlog=self._backlog, reuse_address=self._reuse_address, reuse_port=self._reuse_port,
        )  # fmt: skip
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port
