"""One streamed one-token completion: the proof that a started engine generates (`first_token_check`).

An engine's `/health` and its ready line say its HTTP server is up; neither says a request gets a token
(vLLM's `/health` reads a flag set only when its engine core exits). The start is READY once this
request's first token has arrived. The request is sent through the service's health probe (its session,
its User-Agent, its SSH forward), to `/v1/completions`, `max_tokens` 1, `stream` true.

A token has arrived at the first stream chunk whose choice carries text, token ids or a finish reason:
vLLM may open a completion stream with an empty-text chunk (and holds back a partial UTF-8 character as
an empty one), and a one-token stream's only token chunk carries `finish_reason`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from console.domain.safe_text import printable
from console.errors import HostError
from console.hosts.endpoints.bodies import json_document, read_limited
from console.hosts.endpoints.health import MAX_PROBE_BODY_BYTES, HttpHealthProbe

#: The prompt: short, so its prefill is one step on any engine.
PROMPT = "Hello"
#: The most of a stream read before its first token (a server that streams chunks without one is cut off).
MAX_STREAM_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class FirstToken:
    """One attempt: the token's arrival, or why there was none."""

    sent_at: float
    """When the request was sent (POSIX seconds)."""
    first_token_at: float | None = None
    """When its first token arrived, None when none did."""
    http_status: int | None = None
    error: str | None = None
    """Why no token arrived, in one printable line."""

    @property
    def ok(self) -> bool:
        return self.first_token_at is not None


def _has_token(doc: Any) -> bool:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
    return bool(choice.get("text") or delta.get("content") or choice.get("token_ids")
                or choice.get("finish_reason"))


def _line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return printable(first)[:200]


class FirstTokenProbe:
    """Sends the one-token request through a service's HttpHealthProbe."""

    def __init__(self, probe: HttpHealthProbe) -> None:
        self.probe = probe
        self._model: str | None = None

    async def _served_model(self, base: str, limit: aiohttp.ClientTimeout) -> str | None:
        """The first model `/v1/models` lists (vLLM before 0.8 requires `model`); None when it lists none."""
        if self._model is None:
            async with self.probe._client().get(base + "/v1/models", timeout=limit) as resp:
                raw = await read_limited(resp, MAX_PROBE_BODY_BYTES)
            if resp.status == 200:
                try:
                    body = json_document(raw)
                except ValueError:
                    body = None
                data = body.get("data") if isinstance(body, dict) else None
                if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
                    self._model = str(data[0]["id"])
        return self._model

    async def first_token(self, timeout_s: float) -> FirstToken:
        """One request, read until its first token, `timeout_s` at most; never raises but on cancel."""
        sent_at = time.time()
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        try:
            base = await self.probe._base()
            body: dict[str, Any] = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0.0, "stream": True}
            model = await self._served_model(base, timeout)
            if model is not None:
                body["model"] = model
            async with self.probe._client().post(base + "/v1/completions", json=body, timeout=timeout,
                                                 allow_redirects=False) as resp:
                if resp.status != 200:
                    text = (await read_limited(resp, 4096)).decode("utf-8", "replace")
                    return FirstToken(sent_at, http_status=resp.status,
                                      error=_line(f"HTTP {resp.status}: {text}"))
                return await self._read(resp, sent_at)
        except HostError as exc:
            return FirstToken(sent_at, error=_line(str(exc)))
        except TimeoutError:
            return FirstToken(sent_at, error=f"no first token within {timeout_s:g} s")
        except aiohttp.ClientConnectorError:
            return FirstToken(sent_at, error="connection refused")
        except aiohttp.ClientError as exc:
            return FirstToken(sent_at, error=_line(str(exc)) or type(exc).__name__)

    async def _read(self, resp: aiohttp.ClientResponse, sent_at: float) -> FirstToken:
        pending, read = b"", 0
        async for data in resp.content.iter_any():
            read += len(data)
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                raw = line[5:].strip()
                if raw == b"[DONE]":
                    return FirstToken(sent_at, http_status=200, error="the stream ended without a token")
                try:
                    doc = json_document(raw)
                except ValueError:
                    return FirstToken(sent_at, http_status=200, error="a stream chunk is not JSON")
                if isinstance(doc, dict) and doc.get("error"):
                    return FirstToken(sent_at, http_status=200, error=_line(f"server error: {doc['error']}"))
                if _has_token(doc):
                    return FirstToken(sent_at, first_token_at=time.time(), http_status=200)
            if read > MAX_STREAM_BYTES:
                return FirstToken(sent_at, http_status=200, error="1 MiB of stream without a token")
        return FirstToken(sent_at, http_status=200, error="the stream ended without a token")


def first_token_probe(probe: object) -> FirstTokenProbe | None:
    """The first-token request for a service's probe: over HTTP for an HttpHealthProbe; a probe of another
    kind (a recorded or fixed host) may bring its own as `first_token_probe`; else None."""
    if isinstance(probe, HttpHealthProbe):
        return FirstTokenProbe(probe)
    return getattr(probe, "first_token_probe", None)
