"""The panes' one poll loop: fetch, show, sleep, one poll at a time, never while out of sight."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def poll_forever(
    fetch: Callable[[], Awaitable[T]],
    *,
    show: Callable[[T], None],
    fail: Callable[[str], None],
    wanted: Callable[[], bool],
    wait: Callable[[], Awaitable[None]],
    idle_s: float,
    timeout_s: float,
) -> None:
    """Poll until cancelled (the owning pane's worker ends when it unmounts).

    Args:
        fetch: one sample.
        show: takes a sample.
        fail: takes the one-line reason a fetch failed or timed out (the pane shows it as stale).
        wanted: whether to fetch now; a pane out of sight is not polled.
        wait: sleeps until the next poll (a pane may wake it early).
        idle_s: how long to sleep while not wanted.
        timeout_s: the bound of one fetch.
    """
    while True:
        if not wanted():
            await asyncio.sleep(idle_s)
            continue
        try:
            async with asyncio.timeout(timeout_s):
                value = await fetch()
        except Exception as exc:  # a host going down marks the pane stale, never crashes it
            fail(str(exc) or type(exc).__name__)
        else:
            show(value)
        await wait()
