"""The panes' one poll loop: fetch, show, sleep, one poll at a time, never while out of sight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


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
        fail: takes the one-line reason a fetch failed, timed out or could not be shown (the pane shows
            it as stale); the poll goes on whatever either of them raises.
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
            show(value)
        except Exception as exc:  # a host going down, or an answer the pane cannot show, marks it stale
            _report(fail, exc)
        await wait()


def _report(fail: Callable[[str], None], exc: Exception) -> None:
    """Hand the reason to the pane; a pane that cannot show even that is logged, and the poll goes on."""
    try:
        fail(str(exc) or type(exc).__name__)
    except Exception:  # a poll never dies of a bad answer
        log.exception("a pane could not show why its poll failed")
