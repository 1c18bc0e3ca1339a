"""Where the watch daemon's alerts go over HTTP: Alertmanager's API v2 and a generic JSON webhook.

Both are one JSON POST. Credentials never come from hosts.toml:
`SERVE_CONSOLE_ALERTMANAGER_AUTHORIZATION` is the whole Authorization header for every Alertmanager;
the webhook is `SERVE_CONSOLE_WATCH_WEBHOOK_URL`, with `SERVE_CONSOLE_WATCH_WEBHOOK_AUTHORIZATION` as its
header. An answer is read to 64 KiB and made printable; a failure is one `DeliveryError` line that says
whether trying again can help.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from console.domain.safe_text import printable
from console.hosts.endpoints.bodies import read_limited

ALERTMANAGER_AUTHORIZATION_ENV = "SERVE_CONSOLE_ALERTMANAGER_AUTHORIZATION"
WEBHOOK_URL_ENV = "SERVE_CONSOLE_WATCH_WEBHOOK_URL"
WEBHOOK_AUTHORIZATION_ENV = "SERVE_CONSOLE_WATCH_WEBHOOK_AUTHORIZATION"
ALERTS_PATH = "/api/v2/alerts"
_ANSWER_LIMIT_BYTES = 64 * 1024
#: The only answers that blame the request itself: it is malformed (a label Alertmanager refuses). Every
#: other refusal may end without the request changing: a redirect, a 404, 405 or 413 is the destination's
#: configuration (a moved URL, a wrong route prefix, a proxy's body limit), a 401/403 its credentials.
_REQUEST_FAULTS = frozenset({400, 422})


class DeliveryError(Exception):
    """A POST that did not land; `retry` says whether the same request may land later; `status` is the HTTP
    status the destination answered (None: no answer, it is unreachable or timed out)."""

    def __init__(self, message: str, *, retry: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.status = status


def _refusal(status: int, location: str) -> str:
    """What a refusal that is no fault of the request says is wrong with the destination."""
    if 300 <= status < 400:
        where = urlsplit(location)
        moved = f" to {where.scheme}://{where.hostname}" if where.scheme and where.hostname else ""
        return (f" (it redirects{moved}; redirects are not followed: set the URL it answers on;"
                " nothing is dropped, every alert stays queued)")
    if status in (401, 403):
        return " (set its credentials in the environment; every alert stays queued)"
    if status in (404, 405):
        return " (the URL is not its alerts endpoint: check the URL and any route prefix; every alert stays queued)"
    if status == 413:
        return " (a body limit in front of it, e.g. a proxy's: raise it; every alert stays queued)"
    return ""


def http_url_problem(url: str) -> str | None:
    """Why `url` is no http(s) URL with a host, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL with a host"
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        return "whitespace or a control character in URL"
    return None


class JsonPoster:
    """POSTs JSON documents to one URL over one aiohttp session.

    Args:
        url: Where to POST.
        name: How errors name the destination (`alertmanager http://am:9093`).
        headers: Extra headers (Authorization).
        timeout_s: Per request.
    """

    def __init__(self, url: str, *, name: str, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 10.0) -> None:
        self.url = url
        self.name = name
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                                                  headers=self.headers)
        return self._session

    async def post(self, document: Any) -> None:
        """POST `document` as JSON.

        Raises:
            DeliveryError: unreachable, timed out or refused (one line, printable).
        """
        body = json.dumps(document, ensure_ascii=True, allow_nan=False)
        try:
            async with self._client().post(self.url, data=body, allow_redirects=False) as resp:
                answer = await read_limited(resp, _ANSWER_LIMIT_BYTES)
                status, location = resp.status, resp.headers.get("Location", "")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise DeliveryError(f"{self.name}: unreachable ({printable(str(exc) or type(exc).__name__)[:200]})",
                                retry=True) from None
        if 200 <= status < 300:
            return
        text = printable(answer[:300].decode("utf-8", "replace").strip())
        why = printable(_refusal(status, location))
        raise DeliveryError(f"{self.name}: HTTP {status}{why}: {text}"[:600], retry=status not in _REQUEST_FAULTS,
                            status=status)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def alertmanager_poster(base_url: str, environ: Mapping[str, str] | None = None,
                        timeout_s: float = 10.0) -> JsonPoster:
    """A poster of alerts to Alertmanager's `POST /api/v2/alerts` under `base_url`."""
    env = os.environ if environ is None else environ
    header = env.get(ALERTMANAGER_AUTHORIZATION_ENV, "").strip()
    return JsonPoster(base_url.rstrip("/") + ALERTS_PATH, name=f"alertmanager {base_url}",
                      headers={"Authorization": header} if header else None, timeout_s=timeout_s)


def webhook_from_env(environ: Mapping[str, str] | None = None, timeout_s: float = 10.0) -> JsonPoster | None:
    """The webhook the environment names, or None.

    Raises:
        ValueError: the variable holds no usable URL (one line naming it; the URL may carry a token, so it
            is not repeated).
    """
    env = os.environ if environ is None else environ
    url = env.get(WEBHOOK_URL_ENV, "").strip()
    if not url:
        return None
    if problem := http_url_problem(url):
        raise ValueError(f"{WEBHOOK_URL_ENV}: {problem}")
    header = env.get(WEBHOOK_AUTHORIZATION_ENV, "").strip()
    parts = urlsplit(url)
    return JsonPoster(url, name=f"webhook {parts.scheme}://{parts.hostname}",
                      headers={"Authorization": header} if header else None, timeout_s=timeout_s)
