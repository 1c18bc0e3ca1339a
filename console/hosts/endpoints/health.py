"""Readiness probes of a service's HTTP endpoints, from the console or through an SSH port forward.

`/health` decides readiness (SGLang answers 503 while it warms up, 200 when a generation works;
vLLM 200, or 503 once its engine died). `/v1/models` is asked only of a plain OpenAI-compatible server
whose `/health` answers 404 (SGLang answers it before warm-up ends, so it is never readiness on its
own), and recorded in `models_ok`; no other probe sends it, so an idle engine's access log is not
flooded with it.

Every request carries `User-Agent: serve-console/<version> (probe)` (PROBE_USER_AGENT), so the
console's own requests can be told apart in an engine's access log, and folded out of the journal.
"""

from __future__ import annotations

import time
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from console import __version__
from console.domain.safe_text import printable
from console.domain.values import Engine, HealthSample
from console.errors import HostError
from console.hosts.endpoints.bodies import read_limited
from console.hosts.sockets import socket_factory

#: What the console's probes say they are (the journal folds access lines that carry it).
PROBE_USER_AGENT = f"serve-console/{__version__} (probe)"
#: The most of a `/health` or `/v1/models` body read; only the status counts, and a server that answers
#: gigabytes is cut off here (the connection is never reused: force_close).
MAX_PROBE_BODY_BYTES = 1 << 20


class LocalForward(Protocol):
    """Something that gives a local port reaching the engine (SshPortForward)."""

    async def local_port(self) -> int: ...


def _short(exc: BaseException) -> str:
    """An exception's first line; its text may quote what the server sent, so it is made printable."""
    text = str(exc).strip()
    return printable(text.splitlines()[0]) if text else type(exc).__name__


class HttpHealthProbe:
    """HealthProbe over aiohttp (never blocks the event loop)."""

    def __init__(
        self, url: str, engine: Engine, *, forward: LocalForward | None = None, timeout_s: float = 3.0
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"health URL {url!r} is not an http(s) URL")
        self.url = url.rstrip("/")
        self.engine = engine
        self.forward = forward
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def base_url(self) -> str:
        """The URL requests take now: the service's own, or the SSH forward's local port."""
        return await self._base()

    async def _base(self) -> str:
        if self.forward is None:
            return self.url
        port = await self.forward.local_port()
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, f"127.0.0.1:{port}", parts.path, "", "")).rstrip("/")

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                headers={"User-Agent": PROBE_USER_AGENT},
                # one connection per request: a pooled one may belong to a forward that died; never
                # a connection to itself on the port of an engine that is starting (hosts/sockets.py)
                connector=aiohttp.TCPConnector(force_close=True, socket_factory=socket_factory),
            )
        return self._session

    async def _get(self, url: str) -> int:
        async with self._client().get(url, allow_redirects=False) as resp:
            await read_limited(resp, MAX_PROBE_BODY_BYTES)
            return resp.status

    async def probe(self) -> HealthSample:
        """One probe: "down" (refused, reset, timed out), "starting" (not 200 yet) or "ready"."""
        started = time.monotonic()
        now = time.time()
        try:
            base = await self._base()
            status = await self._get(base + "/health")
        except HostError as exc:
            return HealthSample(taken_at=now, status="down", error=printable(str(exc)))
        except TimeoutError:
            return HealthSample(taken_at=now, status="down", error=f"timed out after {self.timeout_s:g} s")
        except aiohttp.ClientConnectorError as exc:
            return HealthSample(taken_at=now, status="down", error=f"connection refused ({_short(exc)})")
        except aiohttp.ClientError as exc:
            return HealthSample(taken_at=now, status="down", error=_short(exc))
        latency_s = time.monotonic() - started
        models_ok = None
        if self.engine == Engine.OPENAI and status == 404:  # a server with no /health at all
            try:
                models_ok = await self._get(base + "/v1/models") == 200
            except (TimeoutError, aiohttp.ClientError):
                models_ok = None
        ready = status == 200 or bool(models_ok)
        return HealthSample(
            taken_at=now,
            status="ready" if ready else "starting",
            http_status=status,
            latency_s=latency_s,
            models_ok=models_ok,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
