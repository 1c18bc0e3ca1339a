"""The canary: one streamed one-token completion, to learn whether an idle engine still generates.

It asks `/v1/models` for the served name, then posts `{"model": NAME, "prompt": "ping", "max_tokens": 1,
"stream": true, "temperature": 0}` to `/v1/completions` with the User-Agent `serve-console/VERSION
(canary)`, and waits for the first streamed chunk that carries the token: text or its finish
(docs/safety.md). Only its
arrival is timed; the rest of the stream is not read. Sent through the same route as the health probe.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiohttp

from console import __version__
from console.hosts.endpoints.bodies import json_document, read_limited
from console.hosts.endpoints.health import MAX_PROBE_BODY_BYTES, HttpHealthProbe

USER_AGENT = f"serve-console/{__version__} (canary)"
CANARY_PROMPT = "ping"


@dataclass(frozen=True, slots=True)
class CanaryResult:
    """One canary: when it was sent, the seconds to its first token (None: none came), and why not."""

    sent_at: float
    first_token_s: float | None
    timed_out: bool = False
    error: str | None = None


def _is_token(line: bytes) -> bool:
    """A chunk that carries the token: text, or the finish (vLLM may open with an empty-text chunk, and
    holds back a partial UTF-8 token, whose chunk then has empty text and, at max_tokens 1, the finish)."""
    if not line.startswith(b"data:") or b'"choices"' not in line:
        return False
    try:
        doc = json.loads(line[5:])
        choice = doc["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    return isinstance(choice, dict) and bool(choice.get("text") or choice.get("finish_reason"))


async def send_canary(probe: HttpHealthProbe, timeout_s: float) -> CanaryResult:
    """Send one canary and wait at most `timeout_s` for its first token."""
    sent_at = time.time()
    started = time.monotonic()
    headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
    try:
        async with asyncio.timeout(timeout_s):
            base = await probe.base_url()
            async with aiohttp.ClientSession(headers=headers) as session:
                async with session.get(base + "/v1/models") as resp:
                    doc = json_document(await read_limited(resp, MAX_PROBE_BODY_BYTES))
                models = doc.get("data") if isinstance(doc, dict) else None
                model = models[0].get("id") if isinstance(models, list) and models and isinstance(models[0], dict) else None
                body = {"prompt": CANARY_PROMPT, "max_tokens": 1, "stream": True, "temperature": 0}
                if model:
                    body["model"] = model
                async with session.post(base + "/v1/completions", data=json.dumps(body)) as resp:
                    if resp.status != 200:
                        return CanaryResult(sent_at, None, error=f"HTTP {resp.status}")
                    async for line in resp.content:
                        if _is_token(line):
                            return CanaryResult(sent_at, time.monotonic() - started)
                    return CanaryResult(sent_at, None, error="the stream ended without a token")
    except TimeoutError:
        return CanaryResult(sent_at, None, timed_out=True, error=f"no first token in {timeout_s:g} s")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return CanaryResult(sent_at, None, error=str(exc) or type(exc).__name__)
