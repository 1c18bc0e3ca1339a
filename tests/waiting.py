"""Waiting in tests for what happens asynchronously: a condition or an event, never a fixed time.

Every deadline here only guards against a hang; it is scaled by one factor, env
SERVE_CONSOLE_TEST_SLOWDOWN (default 1), for a slow or loaded machine. On timeout the test fails with a
message naming what it waited for. This is the one module in tests/ that sleeps to poll:
tests/unit/test_no_fixed_sleeps.py fails on a fixed sleep or pause anywhere else in tests/, unless its
line carries the marker `# deliberate:` (a stand-in that is slow on purpose).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

SLOWDOWN = float(os.environ.get("SERVE_CONSOLE_TEST_SLOWDOWN") or "1")
#: A hang guard, not a speed target: what a test waits for comes long before it on any machine.
DEFAULT_TIMEOUT_S = 30.0
POLL_S = 0.02
#: On the line of a sleep that is slow on purpose (a stand-in engine that never gets ready).
MARKER = "# deliberate:"


class WaitTimeout(AssertionError):
    """A wait ran past its (scaled) deadline; the message says what it waited for."""


def scaled(timeout_s: float) -> float:
    """`timeout_s` stretched by SERVE_CONSOLE_TEST_SLOWDOWN."""
    return timeout_s * SLOWDOWN


def _fail(what: str, timeout_s: float, last: Any = None) -> WaitTimeout:
    tail = f" (last seen: {last!r})" if last is not None else ""
    return WaitTimeout(f"timed out after {scaled(timeout_s):.1f} s waiting for {what}{tail}")


def wait_for(
    predicate: Callable[[], T], what: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, interval_s: float = POLL_S
) -> T:
    """Poll `predicate()` until it is truthy and return that value; fail naming `what` on timeout."""
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _fail(what, timeout_s)
        time.sleep(interval_s)


async def await_for(
    predicate: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = POLL_S,
) -> T:
    """Like `wait_for` in a coroutine; `predicate` may be a plain function or return an awaitable."""
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _fail(what, timeout_s)
        await asyncio.sleep(interval_s)


def wait_event(event: threading.Event, what: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Block until a threading.Event is set."""
    if not event.wait(scaled(timeout_s)):
        raise _fail(what, timeout_s)


async def await_event(
    thing: asyncio.Event | Awaitable[T], what: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> T | None:
    """Await an asyncio.Event being set, or a task/future/coroutine finishing (its result)."""
    awaitable = thing.wait() if isinstance(thing, asyncio.Event) else thing
    try:
        result = await asyncio.wait_for(awaitable, scaled(timeout_s))
    except TimeoutError:
        raise _fail(what, timeout_s) from None
    return None if isinstance(thing, asyncio.Event) else result


def wait_until(predicate: Callable[[], Any], timeout_s: float = DEFAULT_TIMEOUT_S, interval_s: float = POLL_S) -> bool:
    """Poll until `predicate()` holds; its final truth (for `assert wait_until(...)`, the older form)."""
    try:
        return bool(wait_for(predicate, "a condition", timeout_s=timeout_s, interval_s=interval_s))
    except WaitTimeout:
        return bool(predicate())


async def settle(pilot, predicate: Callable[[], Any] = lambda: True, tries: int | None = None, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, what: str | None = None) -> bool:
    """In a Pilot test: let the app process its messages until `predicate()` holds; its final truth.

    Each round awaits `pilot.pause()` (the app idle), then gives workers and polls real time to run.
    With `what`, a timeout fails the test naming it instead of returning False. `tries` (the older form's
    count of 50 ms steps) only ever lengthens the deadline.
    """
    if tries is not None:
        timeout_s = max(timeout_s, tries * 0.05)
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        await pilot.pause()
        if predicate():
            return True
        if time.monotonic() > deadline:
            if what is not None:
                raise _fail(what, timeout_s)
            return bool(predicate())
        await asyncio.sleep(POLL_S)
