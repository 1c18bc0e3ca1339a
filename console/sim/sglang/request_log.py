"""SGLang's `--log-requests`: each request's `Receive: obj=...` line and each answer's `Finish:` line.

SGLang's tokenizer manager logs the request it received, and the request with its answer once done,
as `dataclass_to_string_truncated` prints them (python/sglang/srt/utils/request_logger.py): a
`GenerateReqInput(...)` whose strings are `repr`s, cut to their first and last halves beyond the
level's length (2048 at the default level 2; levels 0 and 1 leave the text out). The warm-up's own
`/generate` is logged like any client's. Here the native `/generate` and `/v1/completions` are.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

from aiohttp import web

from console.sim.http_server import EngineHttp
from console.sim.sglang.logfmt import EngineLog

#: `--log-requests-level` -> the longest string logged whole (None: the text is left out).
_MAX_LENGTH = {0: None, 1: None, 2: 2048, 3: 1 << 30}


def truncated(value: object, max_length: int) -> str:
    """A value as SGLang's request logger prints it: strings as reprs, a long one as its two halves."""
    if isinstance(value, str):
        if len(value) > max_length:
            half = max_length // 2
            return f"{value[:half]!r} ... {value[-half:]!r}"
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': {truncated(v, max_length)}" for k, v in value.items()) + "}"
    return str(value)


def request_obj(text: str | None, sampling_params: dict[str, Any], rid: str, stream: bool, level: int) -> str:
    """The `GenerateReqInput(...)` SGLang 0.4 logs, its fields in SGLang's order."""
    max_length = _MAX_LENGTH[level]
    fields: list[tuple[str, str]] = []
    if max_length is not None:
        fields += [("text", truncated(text, max_length)), ("input_ids", "None"), ("input_embeds", "None"),
                   ("image_data", "None")]
    if level >= 1:
        fields.append(("sampling_params", truncated(sampling_params, max_length or 1 << 30)))
    fields += [("rid", repr(rid)), ("return_logprob", "False"), ("logprob_start_len", "-1"),
               ("top_logprobs_num", "0"), ("return_text_in_logprobs", "False"), ("stream", str(stream)),
               ("log_metrics", "True"), ("modalities", "[]"), ("lora_path", "None"), ("session_params", "None"),
               ("custom_logit_processor", "None")]
    return "GenerateReqInput(" + ", ".join(f"{name}={value}" for name, value in fields) + ")"


class SglangHttp(EngineHttp):
    """The simulated SGLang's HTTP API; with `--log-requests` (a `request_level`) it logs what SGLang logs.

    Args:
        request_log: SGLang's logger.
        request_level: `--log-requests-level`, or None when requests are not logged.
    """

    def __init__(self, *, request_log: EngineLog, request_level: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request_log = request_log
        self.level = request_level
        self.stall: Any = None
        """The planned stall (console/sim/stall.py), once READY."""

    async def health(self, request: web.Request) -> web.Response:
        """Since SGLang PR #8444 `/health` sends a one-token request and waits up to
        SGLANG_HEALTH_CHECK_TIMEOUT (20 s) for the detokenizer: a blocked scheduler answers 503 then, with
        its real error line. SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false makes it a plain 200."""
        generating = os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true").lower() not in ("false", "0")
        stall = self.stall
        if not (self.ready and generating and stall is not None and (stall.engaged or stall.due())):
            return await super().health(request)
        tic = time.time()
        try:
            timeout_s = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT") or 20)
        except ValueError:
            timeout_s = 20.0
        await asyncio.sleep(timeout_s)
        last = self.generator.last_output_at or tic
        self.request_log.log(
            f"Health check failed. Server couldn't get a response from detokenizer for last {int(timeout_s)} "
            f"seconds. tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. last_heartbeat time: "
            f"{time.strftime('%H:%M:%S', time.localtime(last))}")
        return web.Response(status=503)

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()  # aiohttp keeps the body: the handler reads it again
        except (ValueError, UnicodeDecodeError):
            return {}
        return body if isinstance(body, dict) else {}

    async def native_generate(self, request: web.Request) -> web.Response:
        if self.level is None:
            return await super().native_generate(request)
        body = await self._body(request)
        text = body.get("text")
        params = body.get("sampling_params") if isinstance(body.get("sampling_params"), dict) else {}
        obj = request_obj(text if isinstance(text, str) else None, params, uuid.uuid4().hex, False, self.level)
        self.request_log.log(f"Receive: obj={obj}")
        response = await super().native_generate(request)
        answer = json.loads(response.text or "{}")
        if self.level < 2:
            answer.pop("text", None)  # levels 0 and 1 leave the output text out too
        self.request_log.log(f"Finish: obj={obj}, out={truncated(answer, _MAX_LENGTH[self.level] or 1 << 30)}")
        return response

    async def completions(self, request: web.Request) -> web.StreamResponse:
        if self.level is None:
            return await super().completions(request)
        body = await self._body(request)
        prompt = body.get("prompt")
        params = {"temperature": body.get("temperature", 1.0), "max_new_tokens": body.get("max_tokens"),
                  "stop": body.get("stop")}
        self.request_log.log("Receive: obj=" + request_obj(
            prompt if isinstance(prompt, str) else None, params, uuid.uuid4().hex, bool(body.get("stream")),
            self.level))
        return await super().completions(request)
