"""One browser session: its own app process, its idle clock, its row in the web session log.

textual-serve's AppService starts the app through a shell string; a visitor's app here is started from
an argv (no shell, no quoting), keeps the server's process group (a kill of the server's group reaches
it), and notes the time of every message the browser sends it, which the idle watch reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from textual_serve.app_service import AppService

from console.ops.session_log import IDLE

#: How long an app process has to quit after it was asked before it is killed.
QUIT_GRACE_S = 10.0


class VisitorApp(AppService):
    """The app process of one browser session."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(" ".join(argv), **kwargs)
        self.argv = list(argv)
        self.extra_env = dict(env)
        self.last_input = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {**super()._build_environment(width, height), **self.extra_env}

    async def _open_app_process(self, width: int = 80, height: int = 24):
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
        )
        self._stdin = process.stdin
        return process

    # Every message from the browser reaches the app through one of these: each is input.
    async def send_bytes(self, data: bytes) -> bool:
        self.last_input = time.monotonic()
        return await super().send_bytes(data)

    async def set_terminal_size(self, width: int, height: int) -> None:
        self.last_input = time.monotonic()
        await super().set_terminal_size(width, height)

    async def focus(self) -> None:
        self.last_input = time.monotonic()
        await super().focus()

    async def blur(self) -> None:
        self.last_input = time.monotonic()
        await super().blur()

    async def end(self) -> None:
        """Ask the app to quit; kill it if it has not within QUIT_GRACE_S. Returns once it has exited."""
        process = self._process
        try:
            async with asyncio.timeout(QUIT_GRACE_S):
                await self.stop()
        except TimeoutError:
            pass
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(QUIT_GRACE_S):
                await process.wait()


@dataclass(eq=False)
class Session:
    """A session the server holds open: its log row (None when the log could not be written), its app,
    and why it ends (when the server ends it)."""

    id: int | None
    app: VisitorApp
    outcome: str | None = None
    reason: str | None = None
    idle_watch: asyncio.Task[None] | None = field(default=None, repr=False)

    def ended_by(self, outcome: str, reason: str) -> None:
        """Record the first reason the server gives for ending it."""
        if self.outcome is None:
            self.outcome, self.reason = outcome, reason


async def watch_idle(session: Session, idle_s: float, close: Any) -> None:
    """End the session once the browser has sent nothing for `idle_s` seconds.

    Args:
        session: the session.
        idle_s: the idle limit.
        close: closes the browser's websocket (the app may be gone before it can say so).
    """
    while True:
        left = session.app.last_input + idle_s - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(left)
    session.ended_by(IDLE, f"no input for {idle_s / 60:g} min")
    await session.app.end()
    await close()
