"""The web server: textual-serve's Server, wrapped with the token gate, session limits and the session log.

textual-serve gives the page, the static files and the websocket protocol; this subclass adds what it
has no hook for: the access middleware (access.py), headers on every answer, the page's URLs taken
from the request (so `ssh -L` to any local port works, and the cookie's host is the websocket's), a
cap on open sessions (each is a process), the idle limit, and one log row per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp_jinja2
from aiohttp import WSMsgType, web
from textual_serve.server import Server, to_int

from console.ops.session_log import CLOSED, SERVER_STOPPED, WebSessionLog
from console.ops.state_db import AuditError
from console.shutdown import SHUTDOWN, on_ending_signals
from console.ui.web.access import COOKIE, SESSION_SPENT, AccessGate, security_headers
from console.ui.web.connections import ConnectionGuard, GuardedSite
from console.ui.web.messages import BadMessage, Message, clamp_size, parse
from console.ui.web.sessions import Session, VisitorApp, watch_idle

#: How long a session at the cap waits for one that is ending (a reload) before it is refused.
ROOM_GRACE_S = 2.0


@dataclass(frozen=True)
class WebLimits:
    """What one server allows."""

    max_sessions: int
    """Browser sessions open at once; each runs its own app process."""
    idle_s: float
    """A session with no input from its browser for this long is ended."""
    readonly: bool
    """Visitors' apps run with --readonly (the default on the web)."""


class ConsoleWebServer(Server):
    """Serves one app process per browser session, to browsers holding the session cookie."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, gate: AccessGate, limits: WebLimits,
                 log: WebSessionLog, say: Callable[[str], None] = print) -> None:
        """Args:
            argv: the command of a visitor's app process.
            env: what that process gets on top of the server's environment.
            gate: the token and the cookies it was exchanged for.
            limits: sessions at once, idle limit, read-only.
            log: where each session is recorded.
            say: prints a line for the operator (a session that could not be logged).
        """
        super().__init__(" ".join(argv), title="serve-console")
        self.argv, self.env, self.gate, self.limits, self.log, self.say = list(argv), dict(env), gate, limits, log, say
        self.sessions: set[Session] = set()
        self.guard = ConnectionGuard()
        """Connections without the cookie yet: a deadline and a cap (serve() listens through it)."""
        gate.on_admitted = self.guard.admitted

    async def make_app(self) -> web.Application:
        """textual-serve's application, behind the gate."""
        app = await self._make_app()
        app.middlewares.append(self.gate.middleware)
        app.on_response_prepare.append(security_headers)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: textual-serve prints a banner here; the command prints its own, with the token."""

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> Any:
        if not await self._room():
            raise web.HTTPServiceUnavailable(text=self._full())
        # From the request, not the bind address: through `ssh -L 9000:...` the browser's host is localhost:9000.
        ws_scheme = "wss" if request.scheme == "https" else "ws"
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{ws_scheme}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": "serve-console" + (" (read-only)" if self.limits.readonly else "")},
        }

    async def _room(self) -> bool:
        """Whether a session may start. At the cap, a session that is ending gets a moment to go: a reload
        asks for the new page and websocket while the old page's session still ends."""
        deadline = time.monotonic() + ROOM_GRACE_S
        while len(self.sessions) >= self.limits.max_sessions:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def _full(self) -> str:
        n = self.limits.max_sessions
        return f"503: {n} session{'s' * (n != 1)} open, the most this server allows (--max-sessions); try again later\n"

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        remote, agent = request.remote or "unknown", request.headers.get("User-Agent")
        websocket = web.WebSocketResponse(heartbeat=15)
        if not await self._room():  # and no await from here until the session holds its place
            self._logged(self.log.refused, remote=remote, user_agent=agent, readonly=self.limits.readonly,
                         reason=self._full().strip())
            return web.Response(status=503, text=self._full())
        cookie = request.cookies.get(COOKIE)
        if not self.gate.open_session(cookie):  # the cookie's one session is open already, or over
            return web.Response(status=403, text=SESSION_SPENT)
        try:
            return await self._session(request, websocket, remote, agent)
        finally:
            self.gate.end_session(cookie)  # revoked: another session needs the token again

    async def _session(self, request: web.Request, websocket: web.WebSocketResponse, remote: str,
                       agent: str | None) -> web.StreamResponse:
        session = Session(self._logged(self.log.begin, remote=remote, user_agent=agent,
                                       readonly=self.limits.readonly), VisitorApp(
            self.argv, self.env, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
            close=websocket.close, download_manager=self.download_manager))
        self.sessions.add(session)
        try:
            await websocket.prepare(request)
            await session.app.start(*clamp_size(to_int(request.query.get("width", "80"), 80),
                                                to_int(request.query.get("height", "24"), 24)))
            if session.id is not None:
                self._logged(self.log.started, session.id, session.app.pid)
            session.idle_watch = asyncio.create_task(watch_idle(session, self.limits.idle_s, websocket.close))
            await self._read_messages(websocket, session, remote)
        except asyncio.CancelledError:
            session.ended_by(SERVER_STOPPED, "the web server stopped")
        except (ConnectionError, RuntimeError, ValueError, AssertionError, LookupError, TypeError) as exc:
            # a browser gone mid-write, or a message that is not textual-serve's protocol
            session.ended_by(CLOSED, f"the connection failed: {exc}")
        finally:
            if session.idle_watch is not None:
                session.idle_watch.cancel()
            await session.app.end()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await websocket.close()
            self.sessions.discard(session)
            if session.id is not None:
                self._logged(self.log.end, session.id, session.outcome or CLOSED, session.reason)
        return websocket

    async def _read_messages(self, websocket: web.WebSocketResponse, session: Session, remote: str) -> None:
        """textual-serve's protocol, read strictly (messages.py): a malformed message is ignored, and said
        in one line the first time in a session (not once per message: a browser could send millions)."""
        said = False
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                parsed = parse(message.data)
            except BadMessage as exc:
                if not said:
                    said = True
                    self.say(f"serve-console web: session {session.id} from {remote}: ignored a malformed "
                             f"message ({exc}); later ones are ignored without a word")
                continue
            if parsed is not None:
                await self._deliver(websocket, session.app, parsed)

    @staticmethod
    async def _deliver(websocket: web.WebSocketResponse, app: VisitorApp, message: Message) -> None:
        if message.kind == "stdin":
            await app.send_bytes(message.text.encode("utf-8"))
        elif message.kind == "resize":
            await app.set_terminal_size(message.columns, message.rows)
        elif message.kind == "ping":
            await websocket.send_json(["pong", message.ping])
        elif message.kind == "blur":
            await app.blur()
        elif message.kind == "focus":
            await app.focus()

    async def end_sessions(self) -> None:
        """End every open session (the server stops): each app asked to quit, then killed if it does not."""
        for session in self.sessions:
            session.ended_by(SERVER_STOPPED, "the web server stopped")

        async def end(session: Session) -> None:
            with SHUTDOWN.stopping(f"web session {session.id}'s app (pid {session.app.pid})"):
                await session.app.end()

        await asyncio.gather(*(end(s) for s in list(self.sessions)), return_exceptions=True)

    def _logged(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A log write; a log that fails is said once per write, and the session goes on."""
        try:
            return write(*args, **kwargs)
        except AuditError as exc:
            self.say(f"serve-console web: {exc}")
            return None


async def serve(server: ConsoleWebServer, bind: str, port: int, on_listening: Callable[[int], None],
                background: Callable[[], Any] | None = None) -> None:
    """Listen until SIGINT, SIGTERM or SIGHUP, then end the sessions and close.

    Args:
        server: the server.
        bind: the address to listen on.
        port: the port (0: any free one).
        on_listening: called with the port once listening (prints the URL).
        background: started once listening (the demo's first layout), cancelled at the end.

    Raises:
        OSError: the address cannot be bound.
    """
    runner = web.AppRunner(await server.make_app(), handle_signals=False, access_log=None)
    await runner.setup()
    stopping = asyncio.Event()
    task: asyncio.Task[Any] | None = None
    try:
        site = GuardedSite(runner, bind, port, guard=server.guard)
        await site.start()
        on_listening(int(runner.addresses[0][1]))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stopping.set)
        # The shutdown's deadline bounds the sessions' and the demo's end; a second signal exits at once.
        on_ending_signals(loop, stopping.set)
        if background is not None:
            task = asyncio.create_task(background())
        await stopping.wait()
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await server.end_sessions()
        await runner.cleanup()
