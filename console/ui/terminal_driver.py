"""Textual's Linux driver, for a terminal that may go away at any moment (tmux killed, SSH dropped).

A terminal's hangup brings SIGHUP and SIGCONT; Textual's driver took the SIGCONT for a resume from
Ctrl-Z and started a second writer thread, over the dead terminal, which died on EIO. Its queue (30
writes, a `put` that waits for ever) then filled and the event loop blocked in a write for good (seen
under load: `Queue.put` from a watcher, from `disable_input`, from `close`; SIGTERM ignored, as the loop
that handled it was the one blocked). Here only a SIGCONT after our own suspend resumes, and a write
waits a bounded time: when the queue does not drain and the terminal no longer answers (or the writer
died), the terminal is taken as lost, output is dropped, and the app shuts down within the shutdown's
deadline (console/shutdown.py).
"""

from __future__ import annotations

import asyncio
import queue
import termios
from collections.abc import Callable
from typing import Any

from textual.drivers.linux_driver import LinuxDriver

from console.shutdown import SHUTDOWN

#: Seconds a write waits for room before it checks that the terminal is still there.
WRITE_WAIT_S = 1.0


def terminal_answers(fd: int) -> bool:
    """Whether `fd` is still a terminal that answers: a hung-up one fails TCGETS with EIO."""
    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        return False
    return True


class _TerminalFile:
    """The terminal the writer thread writes to: a write that fails (EIO, the terminal gone) reports the
    loss at once, and the thread lives on, draining its queue into nothing."""

    def __init__(self, file: Any, on_lost: Callable[[], None]) -> None:
        self._file, self._on_lost = file, on_lost

    def write(self, text: str) -> None:
        try:
            self._file.write(text)
        except (OSError, ValueError):
            self._on_lost()

    def flush(self) -> None:
        try:
            self._file.flush()
        except (OSError, ValueError):
            self._on_lost()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: the terminal's own
        return getattr(self._file, name)


class ConsoleDriver(LinuxDriver):
    """LinuxDriver whose writes and close never wait for ever on a terminal that went away."""

    _lost = False
    _loop: asyncio.AbstractEventLoop | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._file = _TerminalFile(self._file, self.terminal_lost)

    def _sigcont_application(self, *args: object) -> None:
        # The kernel sends SIGCONT with SIGHUP when the terminal hangs up. Textual took it for a resume
        # from Ctrl-Z and started application mode again: a second writer thread over the dead terminal,
        # which died on EIO, and the app's next 30 writes filled its queue and blocked the loop for good.
        # Only a SIGCONT after our own suspend is a resume.
        if self._must_signal_resume:
            super()._sigcont_application(*args)

    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()

    def write(self, data: str) -> None:
        writer = self._writer_thread
        if self._lost or writer is None:
            return
        while True:
            try:
                writer._queue.put(data, timeout=WRITE_WAIT_S)  # Textual's own queue, bounded here
                return
            except queue.Full:
                if not writer.is_alive() or not terminal_answers(self.fileno):
                    self.terminal_lost()
                    return

    def close(self) -> None:
        writer = self._writer_thread
        if writer is None or self._lost:  # a daemon thread: nothing left to flush to a lost terminal
            return
        try:
            writer._queue.put(None, timeout=WRITE_WAIT_S)
        except queue.Full:
            return
        writer.join(timeout=WRITE_WAIT_S)

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        except OSError:  # EIO: the terminal hung up under the reader
            self.terminal_lost()

    def terminal_lost(self) -> None:
        """Drop all further output and end the app, within the shutdown's deadline."""
        if self._lost:
            return
        self._lost = True
        SHUTDOWN.begin("the terminal went away")
        loop, app = self._loop, self._app
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(app.exit)
            except RuntimeError:  # the loop closed meanwhile
                pass
