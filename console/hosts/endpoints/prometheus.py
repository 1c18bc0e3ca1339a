"""A small client of the Prometheus HTTP API: instant queries over aiohttp, auth from the environment.

Credentials never come from hosts.toml. In order, the `Authorization` header is:
`SERVE_CONSOLE_PROMETHEUS_AUTHORIZATION` (the whole header value, e.g. `Basic ...`), else
`SERVE_CONSOLE_PROMETHEUS_TOKEN` as a bearer token, else the netrc entry (`$NETRC` or `~/.netrc`)
of the URL's host as basic auth, else none.
"""

from __future__ import annotations

import base64
import math
import netrc
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from console.domain.safe_text import printable
from console.errors import HostError
from console.hosts.endpoints.bodies import json_document, read_limited

AUTHORIZATION_ENV = "SERVE_CONSOLE_PROMETHEUS_AUTHORIZATION"
TOKEN_ENV = "SERVE_CONSOLE_PROMETHEUS_TOKEN"
_BODY_LIMIT_BYTES = 64 * 1024 * 1024  # a vector for thousands of series is a few MB


@dataclass(frozen=True, slots=True)
class VectorSample:
    """One element of an instant vector: its labels and value at the evaluation time."""

    labels: Mapping[str, str]
    value: float
    evaluated_at: float
    """The query's evaluation time (not the sample's own time: ask `timestamp(x)` for that)."""


def auth_headers(url: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The request headers that authenticate to `url` (see the module docstring for the order).

    Raises:
        HostError: the netrc file exists but cannot be read.
    """
    env = os.environ if environ is None else environ
    if header := env.get(AUTHORIZATION_ENV, "").strip():
        return {"Authorization": header}
    if token := env.get(TOKEN_ENV, "").strip():
        return {"Authorization": f"Bearer {token}"}
    host = urlsplit(url).hostname or ""
    path = Path(env["NETRC"]) if env.get("NETRC") else Path(env.get("HOME", "~")).expanduser() / ".netrc"
    if not path.is_file():
        return {}
    try:
        entry = netrc.netrc(str(path)).authenticators(host)
    except OSError as exc:
        raise HostError("prometheus", f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    except netrc.NetrcParseError as exc:  # its message quotes the token it choked on: a password, maybe
        raise HostError("prometheus", f"cannot read {path}:{exc.lineno}: not a netrc file (syntax error)") from None
    if entry is None:
        return {}
    login, _account, password = entry
    pair = f"{login or ''}:{password or ''}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


def _number(text: object) -> float | None:
    """A sample value ("1", "NaN", "+Inf") as a finite float, or None."""
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _quoted(value: object, limit: int, *, quote: bool = False) -> str:
    """A value from the answer for an error line: a string cut (and quoted), any other value named by its
    type (its text could be megabytes), then made printable."""
    if not isinstance(value, str):
        return "nothing" if value is None else f"a JSON {type(value).__name__}"
    return printable(repr(value[:limit]) if quote else value[:limit])


def parse_vector(document: object, label: str) -> list[VectorSample]:
    """The samples of a `/api/v1/query` answer; non-finite values are left out (missing, not zero).

    Raises:
        HostError: the answer is an error or not an instant vector.
    """
    if not isinstance(document, dict):
        raise HostError(label, "the answer is not a JSON object")
    if document.get("status") != "success":  # the server's words: made printable, like all host text
        kind = _quoted(document.get("errorType") or "error", 40)
        raise HostError(label, f"query refused ({kind}): {_quoted(document.get('error', ''), 300)}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise HostError(label, f"expected an instant vector, got {_quoted(kind, 40, quote=True)}")
    out = []
    result = data.get("result")
    for item in result if isinstance(result, list) else ():
        try:
            labels, (at, text) = item["metric"], item["value"]
        except (KeyError, TypeError, ValueError):
            continue
        value, evaluated_at = _number(text), _number(at)
        if value is not None and evaluated_at is not None and isinstance(labels, dict):
            out.append(VectorSample(labels={str(k): str(v) for k, v in labels.items()}, value=value,
                                    evaluated_at=evaluated_at))
    return out


class PrometheusClient:
    """Instant queries against one Prometheus (or a compatible API: Thanos, Mimir, VictoriaMetrics)."""

    def __init__(self, url: str, *, timeout_s: float = 5.0, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"prometheus URL {url!r} is not an http(s) URL")
        self.url = url.rstrip("/")
        self.label = f"prometheus {parts.scheme}://{parts.netloc}"
        self.timeout_s = timeout_s
        self.headers = dict(auth_headers(url) if headers is None else headers)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s), headers=self.headers
            )
        return self._session

    async def query(self, expr: str, *, at: float | None = None) -> list[VectorSample]:
        """Evaluate `expr` at `at` (default: the server's now) as one POST, which has no URL length limit.

        Raises:
            HostError: unreachable, refused, timed out, or an answer that is not a vector.
        """
        form = {"query": expr}
        if at is not None:
            form["time"] = f"{at:.3f}"
        try:
            async with self._client().post(self.url + "/api/v1/query", data=form) as resp:
                body = await read_limited(resp, _BODY_LIMIT_BYTES)
                status = resp.status
        except TimeoutError:
            raise HostError(self.label, f"timed out after {self.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            why = getattr(exc.os_error, "strerror", None) or type(exc.os_error).__name__
            raise HostError(self.label, f"cannot connect ({why})") from None
        except aiohttp.ClientError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise HostError(self.label, _quoted(first, 300)) from None
        if status in (401, 403):
            raise HostError(self.label, f"HTTP {status}: set {TOKEN_ENV}, {AUTHORIZATION_ENV} or a netrc entry")
        if len(body) > _BODY_LIMIT_BYTES:
            raise HostError(self.label, f"answer larger than {_BODY_LIMIT_BYTES >> 20} MiB")
        try:
            document = json_document(body)
        except ValueError as exc:
            raise HostError(self.label, f"HTTP {status}: the answer is not readable JSON ({exc})") from None
        return parse_vector(document, self.label)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
