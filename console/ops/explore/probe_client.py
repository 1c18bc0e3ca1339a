"""A streaming OpenAI-compatible client for the probe: one aiohttp session, a large read buffer, and no
per-token work beyond finding the content and the usage in each chunk.

Each request asks for exactly `output_len` tokens (`ignore_eos` and `min_tokens`, which vLLM and SGLang
both take) and for the usage in the stream's last chunk (`stream_options.include_usage`). The output-token
count comes from that usage when the server sends it, else from the number of content chunks.

The stream is timed as each engine's own benchmark times it. sglang.bench_serving counts a chunk once it
carries text, and ends a request at the end of its stream. `vllm bench serve` (0.32,
`vllm/benchmarks/lib/endpoint_request_func.py`) counts every chunk that carries a choice, text or not (vLLM
sends an empty one before its first decoded text, and holds back partial UTF-8), and ends a request at its
last such chunk. `every_choice=True` is vLLM's rule.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from console.hosts.endpoints import MAX_PROBE_BODY_BYTES, json_document, read_limited
from console.hosts.sockets import socket_factory
from console.ops.explore.probe_metrics import FROM_CHUNKS, FROM_USAGE, RequestResult

#: aiohttp's default is 64 KiB, which has capped bench clients' throughput about 10x on long outputs;
#: SGLang's bench_serving uses 10 MiB.
READ_BUFSIZE = 10 * 2**20
COMPLETIONS = "completions"
CHAT = "chat"
ENDPOINT_PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's text and lengths."""

    text: str
    prompt_tokens: int
    """The prompt's length as the client estimates it (the server's usage replaces it when sent)."""
    output_len: int


def _error(text: str) -> str:
    """The first line of a server's or aiohttp's message, controls written as escapes (it reaches a
    terminal), at most 200 characters."""
    first = text.strip().splitlines()[0] if text.strip() else "empty error"
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in first)[:200]


def _content(doc: dict[str, Any]) -> str | None:
    """The text a chunk carries (completion text, chat content or reasoning), or None without choices."""
    choices = doc.get("choices")
    if not choices:
        return None
    choice = choices[0]
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return delta.get("content") or delta.get("reasoning_content") or ""


class ProbeClient:
    """One aiohttp session against one OpenAI-compatible server."""

    def __init__(self, base_url: str, *, model: str | None = None, endpoint: str = COMPLETIONS,
                 limit: int = 0, request_timeout_s: float | None = None, every_choice: bool = False) -> None:
        if endpoint not in ENDPOINT_PATHS:
            raise ValueError(f"unknown endpoint {endpoint!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        self.url = self.base_url + ENDPOINT_PATHS[endpoint]
        self.every_choice = every_choice
        """Time every chunk with a choice, text or not, and end at the last one (vLLM's rule)."""
        self._session = aiohttp.ClientSession(
            read_bufsize=READ_BUFSIZE,
            timeout=aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=10.0),
            connector=aiohttp.TCPConnector(limit=limit, ttl_dns_cache=300, socket_factory=socket_factory),
        )

    async def __aenter__(self) -> ProbeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._session.close()

    async def served_model(self) -> str:
        """The first model `/v1/models` lists (the name requests must carry).

        Raises:
            aiohttp.ClientError, TimeoutError: the server did not answer.
            ValueError: the answer lists no model, or is not JSON, or is larger than 1 MiB.
        """
        async with self._session.get(self.base_url + "/v1/models") as resp:
            resp.raise_for_status()
            raw = await read_limited(resp, MAX_PROBE_BODY_BYTES)  # a server may answer gigabytes
        if len(raw) > MAX_PROBE_BODY_BYTES:
            raise ValueError(f"/v1/models answered more than {MAX_PROBE_BODY_BYTES >> 20} MiB")
        body = json_document(raw)
        models = body.get("data") if isinstance(body, dict) else None
        first = models[0] if isinstance(models, list) and models else None
        if not isinstance(first, dict) or not first.get("id"):
            raise ValueError("/v1/models lists no model")
        return str(first["id"])

    def body(self, prompt: Prompt) -> dict[str, Any]:
        """The request body for one prompt."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": prompt.output_len,
            "min_tokens": prompt.output_len,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.endpoint == CHAT:
            body["messages"] = [{"role": "user", "content": prompt.text}]
        else:
            body["prompt"] = prompt.text
        return body

    async def request(self, prompt: Prompt) -> RequestResult:
        """Send one prompt and time its stream; a failure is a result with `ok` false, never raised."""
        payload = json.dumps(self.body(prompt)).encode()
        headers = {"Content-Type": "application/json"}
        started = time.perf_counter()
        try:
            async with self._session.post(self.url, data=payload, headers=headers) as resp:
                if resp.status != 200:
                    text = (await resp.read())[:400].decode("utf-8", "replace")
                    return RequestResult(ok=False, prompt_tokens=prompt.prompt_tokens,
                                         e2e_s=time.perf_counter() - started,
                                         error=_error(f"HTTP {resp.status}: {text}"))
                return await self._read_stream(resp, prompt, started)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            text = str(exc) or type(exc).__name__
            return RequestResult(ok=False, prompt_tokens=prompt.prompt_tokens,
                                 e2e_s=time.perf_counter() - started, error=_error(text))

    async def _read_stream(self, resp: aiohttp.ClientResponse, prompt: Prompt, started: float) -> RequestResult:
        ttft: float | None = None
        last = 0.0
        gaps: list[float] = []
        chunks = 0
        usage_tokens: int | None = None
        usage_prompt: int | None = None
        done = False
        pending = b""
        # One timestamp per read: chunks that arrive in one read arrive at one time, as the client sees.
        async for data in resp.content.iter_any():
            now = time.perf_counter() - started
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, `event:` lines
                raw = line[5:].strip()
                if raw == b"[DONE]":
                    done = True
                    continue
                doc = json.loads(raw)
                if not isinstance(doc, dict):
                    raise ValueError("a stream chunk is not a JSON object")
                if doc.get("error"):
                    raise ValueError(f"server error in stream: {doc['error']}")
                usage = doc.get("usage")
                if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
                    usage_prompt = usage.get("prompt_tokens")
                text = _content(doc)
                if text or (self.every_choice and text is not None):
                    chunks += 1
                    if ttft is None:
                        ttft = now
                    else:
                        gaps.append(now - last)
                    last = now
        e2e = last if self.every_choice and ttft is not None else time.perf_counter() - started
        if not done:
            raise ValueError("the stream ended before data: [DONE]")
        if ttft is None:
            raise ValueError("the stream carried no content")
        return RequestResult(
            ok=True,
            prompt_tokens=int(usage_prompt) if usage_prompt is not None else prompt.prompt_tokens,
            output_tokens=usage_tokens if usage_tokens is not None else chunks,
            tokens_from=FROM_USAGE if usage_tokens is not None else FROM_CHUNKS,
            ttft_s=ttft,
            itl_s=tuple(gaps),
            e2e_s=e2e,
        )
