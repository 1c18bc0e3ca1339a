"""Simulated time: seconds of the story, stretched or squeezed by the time scale."""

from __future__ import annotations

import asyncio
import time


class SimClock:
    """Seconds since the engine started, in story time (real seconds divided by the scale).

    Waiting is by absolute deadline (`until`), so many small waits do not drift.
    """

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._t0 = time.monotonic()

    async def until(self, story_s: float) -> None:
        """Sleep until story second `story_s` (returns at once if it has passed)."""
        delay = story_s * self.scale - (time.monotonic() - self._t0)
        if delay > 0:
            await asyncio.sleep(delay)

    def now(self) -> float:
        """Story seconds since the engine started."""
        return (time.monotonic() - self._t0) / self.scale

    async def sleep(self, story_s: float) -> None:
        """Sleep for `story_s` story seconds."""
        if story_s > 0:
            await asyncio.sleep(story_s * self.scale)
