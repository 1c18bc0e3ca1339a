"""The simulated engine's HTTP API (aiohttp >= 3.8), shaped like SGLang's.

`/v1/models` and `/get_model_info` answer as soon as the server listens; `/health` and
`/health_generate` answer 503 until the warm-up generation has succeeded, then 200. Completions stream
as server-sent events (`data: {...}` chunks, then `data: [DONE]`), one token a chunk at the layout's real
speed, with the usage in a last chunk when `stream_options.include_usage` asks. Access lines look like
uvicorn's.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import time
import uuid
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from console.sim.generation import Generator, count_prompt_tokens
from console.sim.logfmt import UvicornLog
from console.sim.metrics import Metrics

DEFAULT_MAX_TOKENS = 128


def _access_logger_for(log: UvicornLog, *, agent: bool) -> type[AbstractAccessLogger]:
    class UvicornAccessLogger(AbstractAccessLogger):
        """Writes `INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK "agent"` per request."""

        @property
        def enabled(self) -> bool:  # aiohttp >= 3.9 asks; our lines do not go through logging
            return True

        def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
            peer = request.transport.get_extra_info("peername") if request.transport else None
            client = f"{peer[0]}:{peer[1]}" if peer else "-"
            try:
                phrase = http.HTTPStatus(response.status).phrase
            except ValueError:
                phrase = ""
            version = f"{request.version.major}.{request.version.minor}"
            line = f'{client} - "{request.method} {request.path_qs} HTTP/{version}" {response.status} {phrase}'
            if agent:  # the client's User-Agent after it, as a combined log has it
                line += ' "' + request.headers.get("User-Agent", "-").replace('"', "'") + '"'
            log.uvicorn("INFO", line)

    return UvicornAccessLogger


class EngineHttp:
    """The aiohttp application and its runner.

    The OpenAI stream's shape is SGLang's here; an engine that streams otherwise overrides the hooks
    `stream_id`, `choice_fields`, `usage_fields` and `chunk_json`, and `access_agent`.
    """

    #: The access log shows the client's User-Agent (SGLang's simulated log does; real uvicorn does not).
    access_agent = True

    def __init__(self, *, served_name: str, model_path: str, context_len: int, generator: Generator,
                 metrics: Metrics, log: UvicornLog, metrics_enabled: bool = True) -> None:
        self.served_name, self.model_path, self.context_len = served_name, model_path, context_len
        self.generator, self.metrics, self.log = generator, metrics, log
        self.metrics_enabled = metrics_enabled
        """SGLang serves /metrics only with --enable-metrics; without it the route answers 404."""
        self.ready = False
        self.created = int(time.time())
        self.app = web.Application()
        self.app.router.add_get("/v1/models", self.models)
        self.app.router.add_get("/get_model_info", self.model_info)
        self.app.router.add_get("/get_server_info", self.server_info)
        self.app.router.add_get("/health", self.health)
        self.app.router.add_get("/health_generate", self.health)
        self.app.router.add_get("/metrics", self.metrics_page)
        self.app.router.add_post("/generate", self.native_generate)
        self.app.router.add_post("/v1/completions", self.completions)
        self.app.router.add_post("/v1/chat/completions", self.chat_completions)
        self.runner: web.AppRunner | None = None
        self._generating: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> None:
        """Listen on host:port; raises OSError (errno 98) if the address is taken."""
        runner = web.AppRunner(self.app, access_log_class=_access_logger_for(self.log, agent=self.access_agent),
                               handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self.runner = runner

    async def stop(self) -> None:
        """Stop at once: requests still generating are cut off, as when SGLang's processes are killed."""
        for task in list(self._generating):
            task.cancel()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    # -- the stream's shape (engines differ) ------------------------------------------------------
    def stream_id(self, chat: bool) -> str:
        return uuid.uuid4().hex

    def choice_fields(self, chat: bool, opening: bool, finishing: bool) -> dict[str, Any]:
        """Fields a streamed choice carries beyond index, text/delta, logprobs and finish_reason."""
        return {}

    def opening_fields(self, chat: bool) -> dict[str, Any]:
        """Top-level fields of a stream's opening chunk (a chat's role chunk; a completion's empty one)."""
        return {}

    #: A completion stream opens with an empty-text chunk before the first token (vLLM's does).
    opens_with_empty_text = False

    def usage_fields(self) -> dict[str, Any]:
        """Fields the usage chunk carries beyond its usage."""
        return {}

    def chunk_json(self, doc: dict[str, Any]) -> str:
        return json.dumps(doc)

    # -- endpoints -------------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{
            "id": self.served_name, "object": "model", "created": self.created, "owned_by": "sglang",
            "root": self.served_name, "max_model_len": self.context_len}]})

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": self.model_path, "tokenizer_path": self.model_path,
                                  "is_generation": True, "preferred_sampling_params": None,
                                  "weight_version": "default"})

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response({"served_model_name": self.served_name, "context_length": self.context_len,
                                  "max_total_num_tokens": self.generator.max_total_tokens,
                                  "version": "0.5.5"})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def metrics_page(self, request: web.Request) -> web.Response:
        if not self.metrics_enabled:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.Response(text=self.metrics.render(self.served_name),
                            content_type="text/plain", charset="utf-8")

    @staticmethod
    def _bad_request(message: str) -> web.HTTPBadRequest:
        body = {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
        return web.HTTPBadRequest(text=json.dumps(body), content_type="application/json")

    def _max_tokens(self, raw: object) -> int:
        if raw is None:
            return DEFAULT_MAX_TOKENS
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise self._bad_request(f"max_tokens must be a positive integer, got {raw!r}")
        return raw

    async def _json(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise self._bad_request("invalid JSON body") from None
        if not isinstance(body, dict):
            raise self._bad_request("the body must be a JSON object")
        return body

    @contextlib.asynccontextmanager
    async def _tokens(self, prompt_tokens: int, max_tokens: int):
        """The request's token stream, closed when the request ends (a client hanging up included)."""
        task = asyncio.current_task()
        if task is not None:
            self._generating.add(task)
        try:
            async with contextlib.aclosing(self.generator.generate(prompt_tokens, max_tokens)) as tokens:
                yield tokens
        finally:
            self._generating.discard(task)

    async def _collect(self, prompt_tokens: int, max_tokens: int) -> str:
        async with self._tokens(prompt_tokens, max_tokens) as tokens:
            return "".join([t async for t in tokens])

    async def native_generate(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise self._bad_request("sampling_params must be an object")
        max_tokens = self._max_tokens(params.get("max_new_tokens"))
        prompt_tokens = count_prompt_tokens(str(body.get("text") or ""))
        text = await self._collect(prompt_tokens, max_tokens)
        return web.json_response({"text": text, "meta_info": {
            "id": uuid.uuid4().hex, "finish_reason": {"type": "length", "length": max_tokens},
            "prompt_tokens": prompt_tokens, "completion_tokens": max_tokens, "cached_tokens": 0}})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        prompt = body.get("prompt") or ""
        prompt_text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
        return await self._complete(request, body, count_prompt_tokens(prompt_text), chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise self._bad_request("messages must be a non-empty list")
        text = " ".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
        return await self._complete(request, body, count_prompt_tokens(text) + 4 * len(messages), chat=True)

    async def _complete(self, request: web.Request, body: dict[str, Any], prompt_tokens: int, *,
                        chat: bool) -> web.StreamResponse:
        raw = body.get("max_tokens", body.get("max_completion_tokens"))
        max_tokens = self._max_tokens(raw)
        rid = self.stream_id(chat)
        kind = "chat.completion" if chat else "text_completion"
        model = body.get("model") or self.served_name
        created = int(time.time())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                 "total_tokens": prompt_tokens + max_tokens}
        if not body.get("stream"):
            text = await self._collect(prompt_tokens, max_tokens)
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
            if chat:
                choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None,
                                     "tool_calls": None}
            else:
                choice["text"] = text
            return web.json_response({"id": rid, "object": kind, "created": created, "model": model,
                                      "choices": [choice], "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        chunk_kind = "chat.completion.chunk" if chat else "text_completion"

        async def send(choice: dict[str, Any], opening: bool = False) -> None:
            doc = {"id": rid, "object": chunk_kind, "created": created, "model": model,
                   "choices": [{**choice, **self.choice_fields(chat, opening, choice["finish_reason"] is not None)}],
                   **(self.opening_fields(chat) if opening else {})}
            await response.write(f"data: {self.chunk_json(doc)}\n\n".encode())

        try:
            # As SGLang streams: a chat stream opens with a role-only chunk (empty content); the last token's
            # chunk carries finish_reason; with stream_options.include_usage a last chunk has no choices
            # and the usage.
            if chat:
                await send({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None}, opening=True)
            elif self.opens_with_empty_text:
                await send({"index": 0, "text": "", "logprobs": None, "finish_reason": None}, opening=True)
            sent = 0
            async with self._tokens(prompt_tokens, max_tokens) as tokens:
                async for token in tokens:
                    sent += 1
                    finish = "length" if sent == max_tokens else None
                    if chat:
                        await send({"index": 0, "delta": {"content": token}, "logprobs": None,
                                    "finish_reason": finish})
                    else:
                        await send({"index": 0, "text": token, "logprobs": None, "finish_reason": finish})
            options = body.get("stream_options")
            if isinstance(options, dict) and options.get("include_usage"):
                doc = {"id": rid, "object": chunk_kind, "created": created, "model": model, "choices": [],
                       "usage": usage, **self.usage_fields()}
                await response.write(f"data: {self.chunk_json(doc)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client hung up mid-stream: uvicorn, the real engines' server, says nothing of it
        return response
