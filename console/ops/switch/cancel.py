"""Ending a watch's tasks for certain, whatever asyncio does with a cancel."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_tasks(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the watchers and wait for them, re-cancelling any that lost its cancel: a cancel that
    lands as an awaited command finishes can be swallowed (Python 3.11's `asyncio.wait_for` does
    that), and one unbounded `await task` would then hang the switch for good."""
    pending = {task for task in tasks if not task.done()}
    for _round in range(10):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=1.0)
    # Still running after 10 cancels (never seen): leave them; they end at their next check of the verdict.
    for task in tasks:
        if task.done() and not task.cancelled():
            with contextlib.suppress(Exception):
                task.result()  # retrieved, so asyncio never logs it as unhandled
