"""Counting over time in bounded memory: events in a sliding window, and a condition held for a while.

A daemon runs for days: every structure here forgets what falls out of its window and holds at most
`cap` entries, so a unit that restarts every second for a week costs no more than one that restarted
three times.
"""

from __future__ import annotations

from collections import deque

#: Most events a window keeps; a threshold is a handful, so counting beyond this says nothing more.
DEFAULT_CAP = 1024


class EventWindow:
    """Times of events within the last `window_s` seconds.

    Args:
        window_s: How far back events count.
        cap: Most events kept (the oldest go first).
    """

    __slots__ = ("_times", "last", "window_s")

    def __init__(self, window_s: float, cap: int = DEFAULT_CAP) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque(maxlen=cap)
        self.last: float | None = None
        """The newest event ever seen (kept when it leaves the window: a quiet window is measured from it)."""

    def add(self, ts: float, count: int = 1) -> None:
        """Record `count` events at `ts` (events may arrive slightly out of order; they are kept sorted)."""
        for _ in range(min(count, self._times.maxlen or count)):
            if self._times and ts < self._times[-1]:
                self._times.append(ts)
                self._times = deque(sorted(self._times), maxlen=self._times.maxlen)
            else:
                self._times.append(ts)
        self.last = ts if self.last is None else max(self.last, ts)

    def add_once(self, ts: float) -> None:
        """Record an event unless one at exactly `ts` is already counted: a journal read again from further
        back repeats its entries, each still one event."""
        if not (self._times and ts <= self._times[-1] and ts in self._times):
            self.add(ts)

    def _forget(self, now: float) -> None:
        while self._times and self._times[0] <= now - self.window_s:
            self._times.popleft()

    def count(self, now: float) -> int:
        """Events within the window ending at `now`."""
        self._forget(now)
        return len(self._times)

    def times(self, now: float) -> list[float]:
        """The events within the window ending at `now`, oldest first."""
        self._forget(now)
        return list(self._times)

    def nth_latest(self, n: int, now: float) -> float | None:
        """The time of the n-th most recent event within the window (1 = the newest), or None."""
        self._forget(now)
        return self._times[-n] if 0 < n <= len(self._times) else None

    def __len__(self) -> int:
        return len(self._times)


class Holding:
    """Whether a condition has held for a while: KV usage above 95% for 5 minutes.

    Args:
        for_s: How long it must hold before it counts.
    """

    __slots__ = ("for_s", "since", "value")

    def __init__(self, for_s: float) -> None:
        self.for_s = for_s
        self.since: float | None = None
        """When it began to hold; None while it does not."""
        self.value: float | None = None
        """The newest reading; None when there is none (no engine, nothing exported)."""

    def observe(self, value: float | None, threshold: float, ts: float) -> None:
        """A reading: at or above `threshold` holds, below (or none) ends it."""
        self.value = value
        if value is None or value < threshold:
            self.since = None
        elif self.since is None:
            self.since = ts

    def held(self, now: float) -> bool:
        return self.since is not None and now - self.since >= self.for_s

    def fires_at(self) -> float | None:
        """When it fires (or fired) if it goes on holding."""
        return None if self.since is None else self.since + self.for_s


class Changes:
    """How often a yes/no reading changed within a window: `/health` flapping.

    Args:
        window_s: How far back changes count.
    """

    __slots__ = ("changes", "current")

    def __init__(self, window_s: float, cap: int = DEFAULT_CAP) -> None:
        self.changes = EventWindow(window_s, cap)
        self.current: bool | None = None

    def observe(self, value: bool, ts: float) -> None:
        if self.current is not None and value != self.current:
            self.changes.add(ts)
        self.current = value

    def count(self, now: float) -> int:
        return self.changes.count(now)
