"""The simulated vLLM server's HTTP API: the shared OpenAI endpoints, with vLLM's own routes around them.

vLLM serves its app only once the engine has started, so there is no "starting" answer: `/health` is
200 while the engine core lives and 503 once it has died (`engine_alive`). `/metrics` is always on and
uses `vllm:` names; `/v1/models` says `owned_by: vllm` and gives `max_model_len`. SGLang's native routes
(`/generate`, `/get_model_info`, ...) do not exist here, as on a real vLLM server (404).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from console.sim.http_server import EngineHttp
from console.sim.vllm.args import VLLM_VERSION
from console.sim.vllm.metrics_text import render_vllm_metrics

#: What `Available routes are:` lists at start-up (the ones this server answers).
ROUTES = (
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/version", "GET"),
    ("/v1/models", "GET"),
    ("/v1/completions", "POST"),
    ("/v1/chat/completions", "POST"),
)


class VllmHttp(EngineHttp):
    """EngineHttp with vLLM's routes and answers, and vLLM 0.32's stream (tests/fixtures/vllm-real/stream-*.txt):
    compact JSON, `cmpl-`/`chatcmpl-` ids, the token-id fields it adds, an empty opening chunk, and the
    usage chunk's system_fingerprint. Its access log shows no User-Agent, as uvicorn's default does not."""

    access_agent = False
    opens_with_empty_text = True

    def __init__(self, *, cache_info: dict[str, str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cache_info = cache_info or {}
        """cache_config_info's labels: block size, memory utilisation, KV cache size."""
        self.engine_alive = True
        self.app = web.Application()
        router = self.app.router
        router.add_get("/health", self.health)
        router.add_get("/metrics", self.metrics_page)
        router.add_get("/version", self.version)
        router.add_get("/v1/models", self.models)
        router.add_post("/v1/completions", self.completions)
        router.add_post("/v1/chat/completions", self.chat_completions)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.engine_alive else 503)

    def stream_id(self, chat: bool) -> str:
        return f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:16]}"

    def choice_fields(self, chat: bool, opening: bool, finishing: bool) -> dict[str, Any]:
        if chat:
            if opening:
                return {}
            return {"stop_reason": None, "token_ids": None} if finishing else {"token_ids": None}
        return {"stop_reason": None, "prompt_token_ids": None, "token_ids": None}

    def opening_fields(self, chat: bool) -> dict[str, Any]:
        return {"prompt_token_ids": None, "prompt_text": None} if chat else {}

    def usage_fields(self) -> dict[str, Any]:
        return {"system_fingerprint": f"vllm-{VLLM_VERSION}-sim"}

    def chunk_json(self, doc: dict[str, Any]) -> str:
        return json.dumps(doc, separators=(",", ":"))

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VLLM_VERSION})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.served_name,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "vllm",
                        "root": self.model_path,
                        "parent": None,
                        "max_model_len": self.context_len,
                        "permission": [
                            {
                                "id": "modelperm-sim",
                                "object": "model_permission",
                                "created": self.created,
                                "allow_create_engine": False,
                                "allow_sampling": True,
                                "allow_logprobs": True,
                                "allow_search_indices": False,
                                "allow_view": True,
                                "allow_fine_tuning": False,
                                "organization": "*",
                                "group": None,
                                "is_blocking": False,
                            }
                        ],
                    }
                ],
            }
        )

    async def metrics_page(self, request: web.Request) -> web.Response:
        text = render_vllm_metrics(self.metrics, self.served_name, self.cache_info)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")
