"""The process's shutdown deadline.

After SIGHUP, SIGTERM or the loss of its terminal the console stops what it started (the demo's units,
SSH connections, port forwards) the orderly way, but within a bound: when the bound passes, a watchdog
thread runs the last-resort actions registered for what still runs (a unit's process group killed), writes
one line naming what did not stop in time, and ends the process with `os._exit`, whatever the main thread
is blocked on. A second ending signal during a shutdown exits at once. The watchdog is a thread, not a task,
so a blocked event loop (a write to a terminal that is gone) cannot hold it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: Seconds a shutdown may take (overridden by SERVE_CONSOLE_SHUTDOWN_DEADLINE_S).
DEFAULT_DEADLINE_S = 7.0
DEADLINE_ENV = "SERVE_CONSOLE_SHUTDOWN_DEADLINE_S"
#: The exit status of a shutdown cut short (a signal's end, as Ctrl-C's).
FORCED_EXIT_CODE = 130


def deadline_s() -> float:
    raw = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_DEADLINE_S
    return value if 0 < value < 3600 else DEFAULT_DEADLINE_S


class Shutdown:
    """One process's shutdown: what is being stopped now, the last resorts, the watchdog."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._pending: dict[int, str] = {}
        self._last_resorts: dict[int, tuple[str, Callable[[], bool]]] = {}
        self._reason: str | None = None
        self.log_path: Path | None = None
        """Where the note goes when stderr is no terminal that still takes it (the state dir's log)."""
        self._exit: Callable[[int], None] = os._exit

    @property
    def begun(self) -> str | None:
        """Why the shutdown began, or None while the process runs normally."""
        return self._reason

    def begin(self, reason: str, *, limit_s: float | None = None) -> bool:
        """Start the watchdog (once): True the first time, False when a shutdown was already under way."""
        with self._lock:
            if self._reason is not None:
                return False
            self._reason = reason
        limit = deadline_s() if limit_s is None else limit_s
        watchdog = threading.Thread(target=self._watch, args=(limit,), name="shutdown-deadline", daemon=True)
        watchdog.start()
        return True

    def signalled(self, name: str) -> bool:
        """An ending signal: begin the shutdown, or, if one is under way, exit now. True on the first."""
        if self.begin(f"{name} received"):
            return True
        self._expire(f"{name} again during the shutdown ({self._reason})")
        return False

    @contextlib.contextmanager
    def stopping(self, what: str) -> Iterator[None]:
        """Mark `what` as being stopped: a deadline that passes meanwhile names it."""
        key = next(self._ids)
        self._pending[key] = what
        try:
            yield
        finally:
            self._pending.pop(key, None)

    def last_resort(self, what: str, action: Callable[[], bool]) -> Callable[[], None]:
        """Register `action` to run if the deadline passes (True when it had something left to end: `what`
        is then named as not stopped in time); returns its undo."""
        key = next(self._ids)
        self._last_resorts[key] = (what, action)
        return lambda: self._last_resorts.pop(key, None)

    def _watch(self, limit_s: float) -> None:
        end = time.monotonic() + limit_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
        self._expire(f"{self._reason}: the shutdown took longer than {limit_s:g} s")

    def _expire(self, why: str) -> None:
        forced = []
        for what, action in list(self._last_resorts.values()):
            try:
                if action():
                    forced.append(what)
            except Exception:
                forced.append(what)
        pending = sorted(set(self._pending.values()) | set(forced))
        left = "; not stopped in time: " + ", ".join(pending) if pending else ""
        self.note(f"serve-console: exiting at once ({why}){left}")
        self._exit(FORCED_EXIT_CODE)

    def note(self, line: str) -> None:
        """One line on stderr; in the state dir's log when stderr no longer takes it."""
        data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
        try:
            if os.isatty(2):  # the TUI may still hold the alternate screen
                os.write(2, b"\x1b[?1049l\x1b[?25h\r")
            os.write(2, data)
            return
        except OSError:
            pass
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.log_path, "ab") as fh:
                    fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ").encode() + data)


#: The process's one shutdown.
SHUTDOWN = Shutdown()


def on_ending_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], object],
                      signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """Call `stop` on the loop at the first of `signals`, with the shutdown's deadline started; a second
    exits at once. A Python-level handler, not the loop's own: it runs even while the loop is blocked."""

    def ending(signum: int, _frame: object) -> None:
        if SHUTDOWN.signalled(signal.Signals(signum).name):
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the watchdog still runs
                loop.call_soon_threadsafe(stop)

    for sig in signals:
        with contextlib.suppress(RuntimeError, ValueError):  # not the main thread: the caller's handlers stay
            signal.signal(sig, ending)
