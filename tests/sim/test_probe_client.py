"""The probe's streaming client and load against small loopback SSE servers with known behaviour."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path

import pytest
from aiohttp import web

from console.errors import UsageError
from console.ops.explore.probe_client import CHAT, ProbeClient, Prompt
from console.ops.explore.probe_load import (
    ProbeOptions,
    WarmupFailed,
    random_prompts,
    run_level,
    sharegpt_prompts,
    warm_up,
)
from console.ops.explore.probe_metrics import summarize


def sse(doc: dict | str) -> bytes:
    return f"data: {doc if isinstance(doc, str) else json.dumps(doc)}\n\n".encode()


class Stub:
    """An SSE server whose behaviour each test picks: usage or not, role chunk, error, cut stream."""

    def __init__(self, *, usage: bool = True, gap_s: float = 0.0, status: int = 200, cut: bool = False,
                 first_delay_s: float = 0.0, whole: bool = False) -> None:
        self.usage, self.gap_s, self.status, self.cut, self.first_delay_s = usage, gap_s, status, cut, first_delay_s
        self.whole = whole
        """Send the whole stream in one write, as a client starved of CPU reads it."""
        self.bodies: list[dict] = []
        self.in_flight = self.peak = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.status != 200:
            return web.Response(status=self.status, text="model overloaded\x1b[2J\nsecond line")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            chat = "messages" in body
            if chat:
                await resp.write(sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}))
            await asyncio.sleep(self.first_delay_s)
            if self.whole:
                chunks = [sse({"choices": [{"text": f" t{i}"}]}) for i in range(body["max_tokens"])]
                await resp.write(b"".join(chunks) + sse("[DONE]"))
                return resp
            for i in range(body["max_tokens"]):
                if i:
                    await asyncio.sleep(self.gap_s)
                choice = {"delta": {"content": f" t{i}"}} if chat else {"text": f" t{i}"}
                await resp.write(sse({"choices": [choice]}))
                if self.cut and i == 1:
                    return resp
            if self.usage:
                await resp.write(sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": body["max_tokens"]}}))
            await resp.write(sse("[DONE]"))
            return resp
        finally:
            self.in_flight -= 1


async def models(_request: web.Request) -> web.Response:
    return web.json_response({"data": [{"id": "m1"}]})


@pytest.fixture
async def serve():
    runners = []

    async def start(stub: Stub) -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", stub.handle)
        app.router.add_post("/v1/chat/completions", stub.handle)
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_a_request_asks_for_exact_lengths_and_usage_and_counts_from_it(serve):
    stub = Stub()
    async with ProbeClient(await serve(stub)) as client:
        client.model = await client.served_model()
        result = await client.request(Prompt("hello", 1, 4))
    assert client.model == "m1"
    body = stub.bodies[0]
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] and body["min_tokens"] == 4 == body["max_tokens"] and body["model"] == "m1"
    assert result.ok and result.output_tokens == 4 and result.tokens_from == "usage"
    assert result.prompt_tokens == 7  # the server's count replaces the estimate
    assert len(result.itl_s) == 3 and result.ttft_s is not None and result.e2e_s >= result.ttft_s


async def test_without_usage_tokens_are_the_content_chunks(serve):
    async with ProbeClient(await serve(Stub(usage=False))) as client:
        result = await client.request(Prompt("hello", 3, 5))
    assert result.ok and result.output_tokens == 5 and result.tokens_from == "chunks"
    assert result.prompt_tokens == 3


async def test_chat_ttft_waits_for_content_not_the_role_chunk(serve):
    async with ProbeClient(await serve(Stub(first_delay_s=0.15)), endpoint=CHAT) as client:
        result = await client.request(Prompt("hello", 1, 2))
    assert result.ok and result.output_tokens == 2
    assert result.ttft_s is not None and result.ttft_s >= 0.15


async def test_vllms_rule_times_every_chunk_with_a_choice_and_ends_at_the_last_token(serve):
    """`vllm bench serve` 0.32 starts TTFT at the first chunk that carries a choice, empty or not (vLLM opens
    with an empty one), and ends a request at its last token chunk, not at [DONE]."""
    stub = Stub(first_delay_s=0.15, gap_s=0.01)
    url = await serve(stub)
    async with ProbeClient(url, endpoint=CHAT, every_choice=True) as vllm_rule:
        early = await vllm_rule.request(Prompt("hello", 1, 3))
    async with ProbeClient(url, endpoint=CHAT) as sglang_rule:
        late = await sglang_rule.request(Prompt("hello", 1, 3))
    assert early.ok and late.ok and early.output_tokens == late.output_tokens == 3
    assert early.ttft_s is not None and early.ttft_s < 0.15 <= late.ttft_s  # the role chunk, sent before the delay
    assert len(early.itl_s) == 3 and len(late.itl_s) == 2  # the role chunk's gap is one more ITL
    assert early.e2e_s >= 0.15 + 2 * 0.01


async def test_a_stream_that_came_in_one_read_is_counted_as_read_whole(serve):
    """A client starved of CPU reads a streamed answer only once it is all there (seen against the real
    vLLM on this machine: TTFT 96 ms against 8.8 ms, TPOT 0): the level counts such streams."""
    async with ProbeClient(await serve(Stub(whole=True, first_delay_s=0.05))) as client:
        whole = await client.request(Prompt("hello", 1, 8))
    async with ProbeClient(await serve(Stub(gap_s=0.01))) as client:
        paced = await client.request(Prompt("hello", 1, 8))
    assert whole.ok and whole.output_tokens == 8 and whole.read_whole and whole.tpot_s < 0.001
    assert paced.ok and not paced.read_whole
    level = summarize([whole, paced], 1.0, concurrency=1)
    assert level.whole_streams == 1 and level.to_json()["whole_streams"] == 1


async def test_an_http_error_is_a_failed_result_in_one_printable_line(serve):
    async with ProbeClient(await serve(Stub(status=503))) as client:
        result = await client.request(Prompt("hello", 1, 2))
    assert not result.ok and result.error == "HTTP 503: model overloaded\\x1b[2J"


async def test_a_stream_cut_before_done_is_a_failure(serve):
    async with ProbeClient(await serve(Stub(cut=True))) as client:
        result = await client.request(Prompt("hello", 1, 5))
    assert not result.ok and "[DONE]" in (result.error or "")


async def test_a_refused_connection_is_a_failure_not_an_exception():
    async with ProbeClient("http://127.0.0.1:9") as client:
        result = await client.request(Prompt("hello", 1, 2))
    assert not result.ok and result.error


async def test_concurrency_is_a_semaphore(serve):
    stub = Stub(gap_s=0.02)
    async with ProbeClient(await serve(stub)) as client:
        summary = await run_level(client, random_prompts(12, 8, 3, seed=1), concurrency=3)
    assert stub.peak == 3 and summary.completed == 12 and summary.failed == 0
    assert summary.total_output_tokens == 36 and summary.concurrency == 3


async def test_request_rate_sends_with_poisson_gaps_under_max_concurrency(serve):
    stub = Stub()
    async with ProbeClient(await serve(stub)) as client:
        started = time.perf_counter()
        summary = await run_level(client, random_prompts(10, 8, 2, seed=1), concurrency=2,
                                  request_rate=50.0, seed=3)
        elapsed = time.perf_counter() - started
    assert summary.completed == 10 and summary.request_rate == 50.0 and stub.peak <= 2
    assert 0.05 < elapsed < 2.0  # nine exponential gaps of mean 20 ms


async def test_max_duration_cuts_a_level_short(serve):
    async with ProbeClient(await serve(Stub(gap_s=0.1))) as client:
        summary = await run_level(client, random_prompts(20, 8, 20, seed=1), concurrency=2,
                                  max_duration_s=0.3)
    assert summary.truncated and summary.completed == 0 and summary.failed == 0
    assert summary.duration_s < 10.0  # cut, not the ~20 s the whole level would take


async def test_warm_up_fails_only_when_every_request_fails(serve):
    async with ProbeClient(await serve(Stub(status=500))) as client:
        with pytest.raises(WarmupFailed, match="HTTP 500"):
            await warm_up(client, ProbeOptions(warmup=2))
    stub = Stub()
    async with ProbeClient(await serve(stub)) as client:
        await warm_up(client, ProbeOptions(warmup=2, output_len=500))
    assert [b["max_tokens"] for b in stub.bodies] == [32, 32]  # capped as SGLang caps its warm-up


def test_random_prompts_are_seeded():
    assert random_prompts(3, 16, 4, seed=5) == random_prompts(3, 16, 4, seed=5)
    assert random_prompts(3, 16, 4, seed=5) != random_prompts(3, 16, 4, seed=6)
    assert len(random_prompts(1, 16, 4, seed=5)[0].text.split()) == 16
    assert ProbeOptions().prompt_count(32) == 128 and ProbeOptions(num_prompts=5).prompt_count(32) == 5
    assert ProbeOptions(request_rate=math.inf, max_concurrency=4).levels() == [(4, math.inf)]


def test_sharegpt_prompts_and_bad_datasets(tmp_path: Path):
    good = tmp_path / "sg.json"
    good.write_text(json.dumps([{"conversations": [{"from": "human", "value": "Why is the sky blue?"},
                                                   {"from": "gpt", "value": "Rayleigh."}]},
                                {"conversations": []}, {"id": 3}]))
    prompts = sharegpt_prompts(good, 3, 16, seed=0)
    assert [p.text for p in prompts] == ["Why is the sky blue?"] * 3 and prompts[0].output_len == 16
    broken = tmp_path / "broken.json"
    broken.write_text('[\n{"conversations": \n')
    with pytest.raises(UsageError, match=r"broken\.json:3: not JSON"):
        sharegpt_prompts(broken, 1, 16, seed=0)
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(UsageError, match="no conversation"):
        sharegpt_prompts(empty, 1, 16, seed=0)
