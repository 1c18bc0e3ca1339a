"""Journals that deliver late, lag, reorder or say nothing: how a loaded SSH link or journald can behave.

Each wraps a host's service manager; the switch's tests use them, and bench/verdict_cases.py times the
switch's verdict through them.
"""

from __future__ import annotations

import asyncio
import time

from waiting import await_for

from console.domain.values import JournalEntry


class NoJournal:
    """A service manager whose journal says nothing: only the unit state can tell.

    Subclasses change what a followed journal delivers by overriding `_follow`; reads without follow
    (the switch's cursor before a start) always go straight to the real journal.
    """

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def _follow(self, unit, after_cursor, lines):
        await asyncio.Event().wait()
        yield  # pragma: no cover

    def _inner_follow(self, unit, after_cursor, lines):
        return self._inner.journal(unit, after_cursor=after_cursor, follow=True, lines=lines)

    def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        if not follow:
            return self._inner.journal(unit, after_cursor=after_cursor, follow=False, lines=lines)
        return self._follow(unit, after_cursor, lines)


class LaggingJournal(NoJournal):
    """A journal that delivers each entry `lag_s` late, as a loaded SSH link can: the unit state shows
    the death before the journal's OOM line arrives."""

    def __init__(self, inner, lag_s):
        super().__init__(inner)
        self.lag_s = lag_s

    async def _follow(self, unit, after_cursor, lines):
        async for entry in self._inner_follow(unit, after_cursor, lines):
            await asyncio.sleep(max(0.0, entry.ts + self.lag_s - time.time()))
            yield entry


class LateJournal(NoJournal):
    """A journal stream that starts only `delay_s` after the unit has died, as journalctl -f over a
    loaded SSH link can: the unit state shows the death before the journal has said anything."""

    def __init__(self, inner, delay_s):
        super().__init__(inner)
        self.delay_s = delay_s

    async def _follow(self, unit, after_cursor, lines):
        async def failed():
            return (await self._inner.state(unit)).active == "failed"

        await await_for(failed, f"{unit} to fail")
        await asyncio.sleep(self.delay_s)  # the late start itself, on purpose
        async for entry in self._inner_follow(unit, after_cursor, lines):
            yield entry


class SystemdLineFirst(NoJournal):
    """A journal that stores systemd's `Main process exited` before the engine's OOM line, as journald
    can when the engine's stdout stream is read after PID 1's message."""

    async def _follow(self, unit, after_cursor, lines):
        held = []
        async for entry in self._inner_follow(unit, after_cursor, lines):
            if "OutOfMemoryError" in entry.message:
                held.append(entry)
                continue
            yield entry
            if "Main process exited" in entry.message:
                for late in held:
                    yield late
                held.clear()


class FakeJournal:
    """A unit's journal that grows while streams follow it; counts the streams open at once."""

    def __init__(self) -> None:
        self.entries: list[JournalEntry] = []
        self.grew = asyncio.Event()
        self.open_now = 0
        self.most_open = 0
        self.opened = 0

    def add(self, message: str) -> JournalEntry:
        entry = JournalEntry(ts=float(len(self.entries)), unit="u.service", message=message,
                             cursor=f"c{len(self.entries)}")
        self.entries.append(entry)
        self.grew.set()
        self.grew = asyncio.Event()
        return entry

    async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        self.open_now += 1
        self.opened += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            if after_cursor is not None:
                at = next(i for i, e in enumerate(self.entries) if e.cursor == after_cursor) + 1
            else:
                at = 0 if lines is None else max(0, len(self.entries) - lines)
            while True:
                while at < len(self.entries):
                    yield self.entries[at]
                    at += 1
                if not follow:
                    return
                await self.grew.wait()
        finally:
            self.open_now -= 1


async def take(stream, n: int, timeout_s: float = 2.0) -> list:
    out = []
    async with asyncio.timeout(timeout_s):
        async for read in stream:
            out.append(read)
            if len(out) == n:
                break
    return out
