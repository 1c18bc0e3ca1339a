"""Waiting in Pilot tests for what the app does asynchronously (workers, polls, modal screens)."""

from __future__ import annotations


async def settle(pilot, predicate=lambda: True, tries: int = 60) -> bool:
    """Pause in 50 ms steps until `predicate()` holds, `tries` times at most; its final value."""
    for _ in range(tries):
        await pilot.pause(0.05)
        if predicate():
            return True
    return predicate()
