"""Who may reach the web console: a token exchanged for a cookie, checked on every request.

textual-serve has no authentication at all, so the server's aiohttp application is wrapped: a
middleware admits a request only with the session cookie, which `/?token=...` hands out. The token
is made at each start (or read from a file the operator controls); each browser that opens the URL
exchanges it once for a cookie of its own (HttpOnly, SameSite=Strict, a 120 s Max-Age, worth one
session and revoked when it ends) and is redirected to `/`, so the token leaves the address bar and the history. Anything else (the
page, the websocket, the static files, a download) is 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from console.errors import UsageError

COOKIE = "serve_console_session"
#: Seconds the browser keeps the cookie (its Max-Age) and the server takes it for a session not yet opened.
COOKIE_MAX_AGE_S = 120
#: The shortest token a token file may hold: a guessable token is no lock.
MIN_TOKEN_CHARS = 24
#: A token file is one short line; anything bigger is not one.
TOKEN_FILE_MAX_BYTES = 4096

UNAUTHORIZED = (
    "401 Unauthorized: open the URL with ?token= that `serve-console web` printed when it started "
    "(the token is made anew at each start; each opening of it is worth one session)\n"
)
SESSION_SPENT = (
    "403 Forbidden: this browser's pass is worth one session, and it is open or over; "
    "open the URL with ?token= again\n"
)

#: Headers on every answer. The page's own stylesheet link to Google Fonts is blocked by the CSP, so
#: an operator's browser asks no third party for anything (and a dropped request never delays the page).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_token() -> str:
    """A random token for one run of the server (256 bits)."""
    return secrets.token_urlsafe(32)


def read_token_file(path: str) -> str:
    """The token in `path`: one line, owned by this user, readable by no one else.

    Raises:
        UsageError: the file is missing, open to others, too short or not one line (one line saying which).
    """
    where = f"token file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where}: not a regular file")
        if info.st_uid != os.getuid():
            raise UsageError(f"{where}: owned by uid {info.st_uid}, not by this user")
        if info.st_mode & 0o077:
            raise UsageError(f"{where}: mode {stat.S_IMODE(info.st_mode):04o} lets others read it; chmod 600 {path}")
        data = os.read(fd, TOKEN_FILE_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > TOKEN_FILE_MAX_BYTES:
        raise UsageError(f"{where}: larger than {TOKEN_FILE_MAX_BYTES} bytes; it holds one token")
    token = data.decode("ascii", errors="replace").strip()
    if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or any(c.isspace() for c in token):
        raise UsageError(f"{where}: the token must be one line of at least {MIN_TOKEN_CHARS} printable "
                         "ASCII characters without spaces (e.g. `openssl rand -hex 32`)")
    return token


def is_loopback(bind: str) -> bool:
    """Whether a bind address reaches only this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


@dataclass
class _Pass:
    """A cookie handed out: when, and whether its one session is open."""

    made_s: float
    in_session: bool = False


class AccessGate:
    """The token, and the cookies handed out for it during this run: each worth one session.

    Cookies have no port: a browser sends this one to every port of the host, so a program listening on
    another port of 127.0.0.1 that the browser visits receives it. It is therefore worth little: it opens
    one session, and only within COOKIE_MAX_AGE_S of the token's exchange; it is revoked when that session
    ends; while the session is open it lets the page, the static files and downloads through, but no
    second session."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._token = token
        self._passes: dict[str, _Pass] = {}
        self._clock = clock
        self.on_admitted: Callable[[object], None] | None = None
        """Called with a request's transport once the gate lets it through (the connection guard's hook)."""

    def exchange(self, offered: str) -> str | None:
        """A new session cookie for the right token, else None."""
        if not hmac.compare_digest(offered.encode(), self._token.encode()):
            return None
        now = self._clock()
        for stale in [c for c, p in self._passes.items() if not self._valid(p, now)]:
            del self._passes[stale]
        cookie = secrets.token_urlsafe(32)
        self._passes[cookie] = _Pass(made_s=now)
        return cookie

    def admits(self, cookie: str | None) -> bool:
        held = self._passes.get(cookie) if cookie is not None else None
        return held is not None and self._valid(held, self._clock())

    def _valid(self, held: _Pass, now: float) -> bool:
        return held.in_session or now - held.made_s < COOKIE_MAX_AGE_S

    def open_session(self, cookie: str | None) -> bool:
        """Spend the cookie on a session: False when it is not valid, or its one session is already open."""
        if not self.admits(cookie) or self._passes[cookie].in_session:  # type: ignore[index]
            return False
        self._passes[cookie].in_session = True  # type: ignore[index]
        return True

    def end_session(self, cookie: str | None) -> None:
        """The cookie's session ended: the cookie is revoked (a new session needs the token again)."""
        if cookie is not None:
            self._passes.pop(cookie, None)

    @web.middleware  # aiohttp 3 takes an undecorated one for its old-style factory
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Exchange `?token=` on the page for a cookie; refuse every request without one."""
        offered = request.query.get("token")
        if offered is not None and request.path == "/" and request.method == "GET":
            cookie = self.exchange(offered)
            if cookie is None:
                return _unauthorized()
            self._admit(request)
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            answer = web.HTTPSeeOther(location="/" + (f"?{urlencode(rest)}" if rest else ""))
            answer.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path="/", max_age=COOKIE_MAX_AGE_S)
            raise answer
        if not self.admits(request.cookies.get(COOKIE)):
            return _unauthorized()
        self._admit(request)
        if request.headers.get("Upgrade", "").lower() == "websocket" and not _same_origin(request):
            return web.Response(status=403, text="403 Forbidden: the websocket's Origin is not this server\n")
        return await handler(request)

    def _admit(self, request: web.Request) -> None:
        if self.on_admitted is not None:
            self.on_admitted(request.transport)


def _unauthorized() -> web.Response:
    return web.Response(status=401, text=UNAUTHORIZED)


def _same_origin(request: web.Request) -> bool:
    """A browser's websocket names the page it came from; it must be this server's (no other site's page)."""
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc.lower() == request.host.lower()


async def security_headers(_request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the headers go on every answer, websocket handshakes and static files too."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
