"""One journal stream per unit, fanned out to every reader of it, each entry triaged once.

The journal pane, the switch watcher and the phase tracker all read a unit's journal. Each used to open
its own `journalctl -f` (an SSH channel each) and triage every line again. The hub opens one stream per
unit, reads each entry once through the triager and the phase tracker, and hands the result to every
subscriber. A subscriber that joins late replays the entries it asked for from a bounded buffer:
exactly those after its cursor, or the last N. When the buffer cannot say (its cursor is older than the
buffer, or the feed has not reached it within a moment), that subscriber gets a stream of its own, so
nothing is lost or repeated either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from console.domain.phases import PhaseTracker
from console.domain.triage import Triager
from console.domain.values import Engine, Finding, FindingClass, JournalEntry, ReadinessEvent

#: Entries kept per unit for subscribers that join late (a switch's watcher joins right after a start).
REPLAY_ENTRIES = 4096
#: How long a late subscriber waits for the shared stream to reach its cursor before it streams alone.
CATCH_UP_S = 1.0


@dataclass(frozen=True, slots=True)
class ReadEntry:
    """A journal entry with what triage and the phase tracker read in it (once, for every reader)."""

    entry: JournalEntry
    findings: tuple[Finding, ...] = ()
    phase: ReadinessEvent | None = None


_END = object()  # queued when a feed ends; an exception instance is queued when it fails


class _Feed:
    """One `journal(unit, follow=True)` stream, its analysis, its replay buffer and its subscribers."""

    def __init__(self, stream: AsyncIterator[JournalEntry], engine: Engine, *, shared: bool) -> None:
        self.engine = engine
        self.shared = shared
        self.triager = Triager(engine)
        self.tracker = PhaseTracker(engine)
        self.buffer: deque[ReadEntry] = deque(maxlen=REPLAY_ENTRIES)
        self.queues: list[asyncio.Queue[object]] = []
        # Late subscribers waiting for the stream to reach their cursor: queue -> (cursor, restart, reached).
        self.waiting: dict[asyncio.Queue[object], tuple[str, bool, asyncio.Event]] = {}
        self.task = asyncio.create_task(self._pump(stream), name="journal-feed")

    def restart_analysis(self) -> None:
        """Read what follows as a new start: a failure seen in an earlier start is reported again."""
        self.triager = Triager(self.engine)
        self.tracker = PhaseTracker(self.engine)

    def analyse(self, entry: JournalEntry) -> ReadEntry:
        # Who wrote the entry decides what it may say: systemd's milestones come only from systemd.
        phase = self.tracker.feed(entry.message, entry.ts, entry.by_systemd)
        findings = tuple(self.triager.feed(entry.message, entry.ts, entry.by_systemd))
        began = self.triager.start.began_at  # a start's last message, reported as the next begins, is its own
        for finding in findings:  # a fatal line ends the start: later lines of it move no phase
            if finding.fatal and finding.cls is not FindingClass.UNIT_FAILED and (finding.seq or began) >= began:
                phase = self.tracker.mark_failed(entry.ts, finding.summary, finding.rank) or phase
        return ReadEntry(entry, findings, phase)

    def replay_after(self, cursor: str | None, restart: bool) -> list[ReadEntry] | None:
        """The buffered entries after `cursor` (re-read as a new start if asked), or None if not buffered.

        No cursor means the unit had no entries when the reader looked: then every buffered entry came
        after that, unless the buffer has already dropped some.
        """
        entries = list(self.buffer)
        if cursor is None:
            at = -1 if len(entries) < (self.buffer.maxlen or 0) else None
        else:
            at = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].entry.cursor == cursor), None)
        if at is None:
            return None
        later = entries[at + 1 :]
        if restart:
            self.restart_analysis()
            later = [self.analyse(r.entry) for r in later]  # the few lines since the cursor, read afresh
            for _ in later:
                self.buffer.pop()
            self.buffer.extend(later)
        return later

    async def _pump(self, stream: AsyncIterator[JournalEntry]) -> None:
        try:
            async for entry in stream:
                read = self.analyse(entry)
                self.buffer.append(read)
                for queue in self.queues:
                    queue.put_nowait(read)
                for queue, (cursor, restart, reached) in list(self.waiting.items()):
                    if entry.cursor == cursor:  # the late subscriber's cursor: it reads from the next entry
                        del self.waiting[queue]
                        if restart:
                            self.restart_analysis()
                        self.queues.append(queue)
                        reached.set()
            end: object = _END
        except asyncio.CancelledError:
            end = _END
        except Exception as exc:  # the stream failed: every subscriber hears it and may subscribe again
            end = exc
        finally:
            with contextlib.suppress(AttributeError):
                await stream.aclose()  # type: ignore[attr-defined]
        for queue in self.queues:
            queue.put_nowait(end)
        for _cursor, _restart, reached in self.waiting.values():
            reached.set()  # it never came: those subscribers stream alone


async def _drain(queue: asyncio.Queue[object]) -> AsyncIterator[ReadEntry]:
    """A subscriber's entries until its feed ends (or raises what the feed failed with)."""
    while True:
        item = await queue.get()
        if item is _END:
            return
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, ReadEntry)
        yield item


class JournalHub:
    """The journal streams of one host's units, one per unit, shared by every subscriber.

    Args:
        services: the host's service manager, looked up at each new stream (tests swap it).
    """

    def __init__(self, services: Callable[[], object]) -> None:
        self._services = services
        self._feeds: dict[str, _Feed] = {}
        self._private = 0

    @property
    def open_streams(self) -> int:
        """Journal streams open now, shared and private (each one is a channel on an SSH host)."""
        return sum(1 for f in self._feeds.values() if not f.task.done()) + self._private

    async def subscribe(
        self, unit: str, *, engine: Engine, after_cursor: str | None = None, lines: int | None = None,
        new_start: bool = False,
    ) -> AsyncIterator[ReadEntry]:
        """Entries of `unit` as read once by the hub: after `after_cursor`, or the last `lines`, then live.

        Args:
            unit: the unit.
            engine: the engine behind it (which milestones and signatures to read).
            after_cursor: start exactly after this entry.
            lines: without a cursor, start with the last `lines` entries (None: all of them).
            new_start: the entries after the cursor are a new start (a switch's watcher): triage and
                phases read them afresh, so a failure that recurs is named again.
        """
        feed = self._feeds.get(unit)
        if feed is not None and feed.task.done():
            del self._feeds[unit]
            feed = None
        queue: asyncio.Queue[object] = asyncio.Queue()
        if feed is None:
            feed = self._open(unit, engine, after_cursor, lines, shared=True)
            self._feeds[unit] = feed
            if new_start:
                feed.restart_analysis()
            feed.queues.append(queue)
        elif after_cursor is not None or new_start:
            replay = feed.replay_after(after_cursor, new_start)
            if replay is None and after_cursor is None:
                async for read in self._alone(unit, engine, None, new_start):  # the buffer dropped some
                    yield read
                return
            if replay is None:
                reached = asyncio.Event()
                feed.waiting[queue] = (after_cursor, new_start, reached)
                if not await self._caught_up(feed, queue, reached):
                    async for read in self._alone(unit, engine, after_cursor, new_start):
                        yield read
                    return
            else:
                for read in replay:
                    queue.put_nowait(read)
                feed.queues.append(queue)
        else:
            for read in list(feed.buffer)[-lines:] if lines else (list(feed.buffer) if lines is None else []):
                queue.put_nowait(read)
            feed.queues.append(queue)
        try:
            async for read in _drain(queue):
                yield read
        finally:
            self._leave(unit, feed, queue)

    async def _caught_up(self, feed: _Feed, queue: asyncio.Queue[object], reached: asyncio.Event) -> bool:
        """Wait for the shared feed to reach the late subscriber's cursor; False if it does not in time."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CATCH_UP_S):
                await reached.wait()
        if queue not in feed.queues:
            feed.waiting.pop(queue, None)
            return False
        return True

    async def _alone(
        self, unit: str, engine: Engine, after_cursor: str | None, new_start: bool
    ) -> AsyncIterator[ReadEntry]:
        """A private stream for a subscriber the shared one cannot serve."""
        feed = self._open(unit, engine, after_cursor, None, shared=False)
        queue: asyncio.Queue[object] = asyncio.Queue()
        feed.queues.append(queue)
        self._private += 1
        try:
            async for read in _drain(queue):
                yield read
        finally:
            self._private -= 1
            feed.task.cancel()

    def _open(
        self, unit: str, engine: Engine, after_cursor: str | None, lines: int | None, *, shared: bool
    ) -> _Feed:
        services = self._services()
        stream = services.journal(unit, after_cursor=after_cursor, follow=True, lines=lines)  # type: ignore[attr-defined]
        return _Feed(stream, engine, shared=shared)

    def _leave(self, unit: str, feed: _Feed, queue: asyncio.Queue[object]) -> None:
        with contextlib.suppress(ValueError):
            feed.queues.remove(queue)
        feed.waiting.pop(queue, None)
        if not feed.queues and not feed.waiting:
            feed.task.cancel()  # the last reader left: close the channel
            if self._feeds.get(unit) is feed:
                del self._feeds[unit]

    async def close(self) -> None:
        """End every stream."""
        feeds = list(self._feeds.values())
        self._feeds.clear()
        for feed in feeds:
            feed.task.cancel()
        for feed in feeds:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await feed.task
