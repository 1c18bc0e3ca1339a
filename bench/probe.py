"""Is the probe's client ever the bottleneck, and how well does it time? Against stand-in SSE servers.

1. Ceiling: a zero-latency stand-in (one token a chunk, each chunk its own write, no waits) in its own
   process on its own core; the probe's client on one core at concurrency 64. It must reach
   at least 10x the fastest simulated layout's aggregate (EP8, 961 tok/s): 9,610 tok/s. Baseline: the
   same requests through aiohttp's defaults (64 KiB read buffer, line by line), the way bench clients
   read before SGLang raised the buffer. Also shown: the whole stream in one write, which leaves the
   stand-in nothing to do (the client's own cost alone).
2. Timing error: a stand-in with known delays (first token 50 ms after the request, then a token every
   10 ms, on absolute due times) records when it sent each chunk; the client's TTFT and ITL are
   compared with the stand-in's own send times (the client's error) and with the configured delays.

    .venv/bin/python bench/probe.py [--prompts 640] [--output-len 256] [--timing-requests 40]

The last line of output is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from aiohttp import web

from console.ops.explore.probe_client import ProbeClient
from console.ops.explore.probe_load import random_prompts, run_level

FASTEST_AGGREGATE = 961.0
TTFT_S, GAP_S = 0.050, 0.010


def _chunk(i: int) -> bytes:
    doc = {"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "stand-in",
           "choices": [{"index": 0, "text": f" tok{i}", "logprobs": None, "finish_reason": None}]}
    return f"data: {json.dumps(doc)}\n\n".encode()


def _usage(n: int) -> bytes:
    doc = {"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "stand-in", "choices": [],
           "usage": {"prompt_tokens": 16, "completion_tokens": n, "total_tokens": 16 + n}}
    return f"data: {json.dumps(doc)}\n\ndata: [DONE]\n\n".encode()


class StandIn:
    """Both stand-ins: `/zero/v1/completions` answers at once, `/timed/v1/completions` on a schedule."""

    def __init__(self) -> None:
        self.bodies: dict[int, bytes] = {}
        self.times: list[dict] = []

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "stand-in"}]})

    async def zero(self, request: web.Request) -> web.StreamResponse:
        """One write per token, as an engine streams (each write its own HTTP chunk and send)."""
        n = (await request.json())["max_tokens"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(n):
            await resp.write(_chunk(i))
        await resp.write(_usage(n))
        return resp

    async def batched(self, request: web.Request) -> web.StreamResponse:
        """The whole stream in one write: the client alone, with nothing left for the server to do."""
        n = (await request.json())["max_tokens"]
        if n not in self.bodies:
            self.bodies[n] = b"".join(_chunk(i) for i in range(n)) + _usage(n)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(self.bodies[n])
        return resp

    async def timed(self, request: web.Request) -> web.StreamResponse:
        received = time.monotonic()
        n = (await request.json())["max_tokens"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent: list[float] = []
        for i in range(n):
            due = received + TTFT_S + i * GAP_S
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent.append(time.monotonic())
            await resp.write(_chunk(i))
        await resp.write(_usage(n))
        self.times.append({"received": received, "sent": sent})
        return resp

    async def report(self, _request: web.Request) -> web.Response:
        times, self.times = self.times, []
        return web.json_response(times)


async def serve_stand_in() -> None:
    stand_in = StandIn()
    app = web.Application()
    for prefix, handler in (("/zero", stand_in.zero), ("/batched", stand_in.batched), ("/timed", stand_in.timed)):
        app.router.add_post(prefix + "/v1/completions", handler)
        app.router.add_get(prefix + "/v1/models", stand_in.models)
    app.router.add_get("/times", stand_in.report)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()


async def naive_level(base: str, prompts, concurrency: int) -> float:
    """The baseline: aiohttp's default read buffer, the stream read line by line, tokens per chunk."""
    import aiohttp

    limit = asyncio.Semaphore(concurrency)
    tokens = 0
    async with aiohttp.ClientSession() as session:

        async def one(prompt) -> None:
            nonlocal tokens
            body = {"model": "stand-in", "prompt": prompt.text, "max_tokens": prompt.output_len, "stream": True}
            async with limit, session.post(base + "/v1/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                        if json.loads(line[6:]).get("choices"):
                            tokens += 1

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts))
    return tokens / (time.perf_counter() - started)


async def ceiling(base: str, prompts, concurrency: int) -> tuple[float, float, int]:
    """(output tok/s, client CPU seconds per 1,000 tokens, failures) of the probe's client."""
    async with ProbeClient(base, limit=concurrency) as client:
        client.model = "stand-in"
        await run_level(client, prompts[:concurrency], concurrency=concurrency)  # connections up
        cpu = time.process_time()
        summary = await run_level(client, prompts, concurrency=concurrency)
        cpu = time.process_time() - cpu
    return summary.output_throughput, 1000 * cpu / max(summary.total_output_tokens, 1), summary.failed


async def timing(base: str, requests: int, output_len: int) -> dict:
    import aiohttp

    results = []
    async with ProbeClient(base + "/timed", limit=1) as client:
        client.model = "stand-in"
        async with aiohttp.ClientSession() as plain:
            await (await plain.get(base + "/times")).read()  # drop any earlier record
            for prompt in random_prompts(requests, 16, output_len, seed=2):
                results.append(await client.request(prompt))
            server = await (await plain.get(base + "/times")).json()
    ttft_err, itl_err, ttft_cfg, itl_cfg, unpaired = [], [], [], [], 0
    for result, record in zip(results, server, strict=True):
        sent = record["sent"]
        gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
        if not result.ok or len(result.itl_s) != len(gaps):
            unpaired += 1
            continue
        ttft_err.append(abs(result.ttft_s - (sent[0] - record["received"])))
        ttft_cfg.append(abs(result.ttft_s - TTFT_S))
        itl_err += [abs(m - s) for m, s in zip(result.itl_s, gaps, strict=True)]
        itl_cfg += [abs(m - GAP_S) for m in result.itl_s]

    def ms(values, q=50):
        if not values:
            return None
        return round(1000 * (statistics.median(values) if q == 50 else statistics.quantiles(values, n=100)[q - 1]), 3)

    return {"ttft_error_median_ms": ms(ttft_err), "ttft_error_p99_ms": ms(ttft_err, 99),
            "itl_error_median_ms": ms(itl_err), "itl_error_p99_ms": ms(itl_err, 99),
            "ttft_vs_configured_median_ms": ms(ttft_cfg), "itl_vs_configured_median_ms": ms(itl_cfg),
            "timing_requests": len(results), "timing_unpaired": unpaired}


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and core in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {core})


async def bench(args: argparse.Namespace, port: int) -> dict:
    base = f"http://127.0.0.1:{port}"
    prompts = random_prompts(args.prompts, 16, args.output_len, seed=1)
    probe_rate, cpu_per_1k, failed = await ceiling(base + "/zero", prompts, 64)
    batched_rate, batched_cpu, batched_failed = await ceiling(base + "/batched", prompts, 64)
    naive_rate = await naive_level(base + "/zero", prompts, 64)
    timed = await timing(base, args.timing_requests, 50)
    return {"probe_rate": probe_rate, "naive_rate": naive_rate, "cpu_per_1k": cpu_per_1k,
            "failed": failed + batched_failed, "batched_rate": batched_rate, "batched_cpu_per_1k": batched_cpu,
            **timed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=640)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--timing-requests", type=int, default=40)
    parser.add_argument("--stand-in", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if args.stand_in:
        _pin(cores[-1])
        asyncio.run(serve_stand_in())
        return
    server = subprocess.Popen([sys.executable, __file__, "--stand-in"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        _pin(cores[0])  # the client on one core; the stand-in on another where there is one
        r = asyncio.run(bench(args, port))
    finally:
        server.terminate()
        server.wait(timeout=10)
    target = 10 * FASTEST_AGGREGATE
    print(f"cores: client {cores[0]}, stand-in {cores[-1]} (of {len(cores)})")
    print(f"client ceiling, concurrency 64:  {r['probe_rate']:10,.0f} tok/s  ({r['cpu_per_1k']:.3f} CPU s per 1k tokens, {r['failed']} failed)")
    print(f"  same, whole stream in one write: {r['batched_rate']:8,.0f} tok/s  ({r['batched_cpu_per_1k']:.3f} CPU s per 1k tokens)")
    print(f"baseline (aiohttp defaults):     {r['naive_rate']:10,.0f} tok/s")
    print(f"ratio vs baseline:               {r['probe_rate'] / r['naive_rate']:10.2f}x")
    print(f"ratio vs 10x fastest layout:     {r['probe_rate'] / target:10.2f}x  (needs >= 1: {target:,.0f} tok/s)")
    print(f"TTFT error vs stand-in's sends:  median {r['ttft_error_median_ms']} ms, p99 {r['ttft_error_p99_ms']} ms")
    print(f"ITL error vs stand-in's sends:   median {r['itl_error_median_ms']} ms, p99 {r['itl_error_p99_ms']} ms")
    print(f"vs the configured delays:        TTFT median {r['ttft_vs_configured_median_ms']} ms, ITL median {r['itl_vs_configured_median_ms']} ms")
    print(json.dumps({
        "bench": "probe", "client_ceiling_tokens_per_s": round(r["probe_rate"]),
        "client_ceiling_one_write_tokens_per_s": round(r["batched_rate"]), "failed": r["failed"],
        "baseline_tokens_per_s": round(r["naive_rate"]), "ratio_vs_baseline": round(r["probe_rate"] / r["naive_rate"], 2),
        "ceiling_vs_required": round(r["probe_rate"] / target, 2), "cpu_s_per_1k_tokens": round(r["cpu_per_1k"], 4),
        **{k: v for k, v in r.items() if k.startswith(("ttft_", "itl_", "timing_"))},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
