"""Slow clients without the token cannot take the web console down (issue 30 E25, slowloris): a connection
has a deadline to show the cookie or the token, and only so many may wait at once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest
from waiting import WaitTimeout, await_for
from web_fakes import TOKEN, stand_in_server

from console.ui.web.server import serve

SLOW = 20
CAP = 8


@pytest.fixture
def own_signal_handlers():
    """serve() installs the process's SIGTERM and SIGHUP handlers: put pytest's back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed this connection (EOF, or a reset)."""
    return reader.at_eof() or reader.exception() is not None


async def _until(predicate, timeout_s: float = 30.0) -> bool:
    try:
        return bool(await await_for(predicate, "a condition", timeout_s=timeout_s))
    except WaitTimeout:
        return bool(await predicate())


async def _slowloris(where: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """`count` connections that send a request's first lines, and then nothing."""
    slow = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", where)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
        await writer.drain()
        slow.append((reader, writer))
    return slow


async def test_slow_requests_without_the_token_are_capped_and_timed_out(tmp_path: Path, own_signal_handlers) -> None:
    server = stand_in_server(tmp_path)
    server.guard.max_unadmitted = CAP
    server.guard.header_timeout_s = 600.0  # first the cap alone
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(server, "127.0.0.1", 0, port.set_result))
    slow: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        where = await asyncio.wait_for(port, timeout=30)
        slow += await _slowloris(where, SLOW)

        async def open_count() -> int:
            return sum(not _closed(r) for r, _w in slow)

        assert await _until(lambda: _at_most(open_count, CAP))  # the oldest beyond the cap were closed
        assert [_closed(r) for r, _w in slow[-CAP:]] == [False] * CAP  # the newest are held, for now
        # A browser with the token still gets in while they are held, and its connection is let go.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            answer = await browser.get(f"http://127.0.0.1:{where}/?token={TOKEN}")
            assert answer.status == 200 and "serve-console" in await answer.text()
        assert server.guard.unadmitted <= CAP
        # Then the deadline: none lives past it.
        server.guard.header_timeout_s = 1.0
        slow += await _slowloris(where, CAP)
        assert await _until(lambda: _at_most(open_count, 0))
        assert server.guard.unadmitted == 0
    finally:
        for _r, writer in slow:
            writer.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.log.close()


async def _at_most(count, limit: int) -> bool:
    return await count() <= limit
