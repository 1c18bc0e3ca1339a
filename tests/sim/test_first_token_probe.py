"""The one-token request on its own, against a loopback server: what counts as the first token, and
each way there is none said in one line (a 503 while warming up, a stream that ends without a token,
an error chunk, a server that never sends one within the attempt's time)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from console.domain.values import Engine
from console.hosts.endpoints import HttpHealthProbe, first_token_probe

RELEASE = web.AppKey("release", asyncio.Event)


@contextlib.asynccontextmanager
async def engine(completions):
    app = web.Application()
    release = app[RELEASE] = asyncio.Event()
    seen: list[dict] = []

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "served-name", "object": "model"}]})

    async def post(request: web.Request) -> web.StreamResponse:
        seen.append(await request.json())
        return await completions(request)

    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", post)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    probe = HttpHealthProbe(f"http://127.0.0.1:{runner.addresses[0][1]}", Engine.VLLM)
    try:
        yield first_token_probe(probe), seen
    finally:
        release.set()  # a handler that holds its stream open ends now, so the server closes at once
        await probe.close()
        await runner.cleanup()


async def stream(request: web.Request, *chunks: object) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for chunk in chunks:
        if chunk == "wait":
            await request.app[RELEASE].wait()
            break
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        await response.write(f"data: {data}\n\n".encode())
    await response.write_eof()
    return response


def choice(text: str, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}


async def test_vllms_empty_opening_chunk_is_not_the_token_the_next_one_is() -> None:
    async def handler(request):
        return await stream(request, choice(""), choice(" Hello", "length"), "[DONE]")

    async with engine(handler) as (prober, seen):
        got = await prober.first_token(10.0)
    assert got.ok and got.http_status == 200 and got.first_token_at >= got.sent_at
    assert seen == [{"prompt": "Hello", "max_tokens": 1, "temperature": 0.0, "stream": True, "model": "served-name"}]


async def test_each_way_without_a_token_is_one_line() -> None:
    async def warming(_request):
        return web.Response(status=503, text="Service Unavailable\nretry later")

    async def empty(request):
        return await stream(request, choice(""), "[DONE]")

    async def error(request):
        return await stream(request, {"error": {"message": "engine dead\x1b[2J", "code": 500}})

    async def silent(request):
        return await stream(request, choice(""), "wait")

    said = {}
    for name, handler, limit in (("warming", warming, 10.0), ("empty", empty, 10.0), ("error", error, 10.0),
                                 ("silent", silent, 0.5)):
        async with engine(handler) as (prober, _):
            got = await prober.first_token(limit)
        assert not got.ok and "\n" not in got.error and "\x1b" not in got.error, (name, got)
        said[name] = got.error
    assert said["warming"] == "HTTP 503: Service Unavailable"
    assert said["empty"] == "the stream ended without a token"
    assert said["error"].startswith("server error: ") and "engine dead" in said["error"]
    assert said["silent"] == "no first token within 0.5 s"
