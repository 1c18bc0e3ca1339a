"""`serve-console demo --stall`: the stall story, headless, on the demo cluster's demo-vllm.

Qwen3-235B TP4 comes up on vLLM; a client streams a long completion; a few seconds in, the 4th rank
diverges (its kernel hangs, the other three spin in the collective that waits for it): the processes
keep running in state R, `/health` keeps answering 200 and vLLM's own watchdog would wait 300 s. The
console reads the engine's per-step counters frozen with a request running and says STALLED, naming
the GPU that differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from console.commands.host_args import print_json

HOST, SERVICE, LAYOUT = "demo-vllm", "qwen3-235b", "TP4"
#: Seconds of serving before the rank diverges (real seconds).
STALL_AFTER_S = 4.0
#: How long the story waits for the verdict past stall_after_s before it calls the story failed.
VERDICT_WAIT_S = 60.0


async def stall_story(config, state_root: Path, as_json: bool) -> int:
    from console.commands.demo_stage import stage
    from console.sim.engine_args import FAIL_ENV
    from console.sim.stall import STALL_AFTER_ENV

    # the engine this story starts gets the fault in its environment, as a unit's Environment= would carry it
    os.environ[FAIL_ENV] = "diverged"
    os.environ[STALL_AFTER_ENV] = repr(STALL_AFTER_S)
    client: asyncio.Task[None] | None = None
    async with stage(config, state_root, as_json, head=HOST, service=SERVICE) as on:
        host, say = on.hosts[HOST], on.say
        service = host.config.service(SERVICE)
        say(f"serve-console demo --stall: {service.name} on {host.name}, {LAYOUT}")
        try:
            say("")
            say(f"1. Switch to {LAYOUT}:")
            if not await on.first_switch(host, service, LAYOUT):
                return 1
            say("2. A client streams a long completion; the console reads status as the TUI does, every second.")
            say(f"   {STALL_AFTER_S:g} s in, the 4th rank's kernel hangs and the other three spin in the collective:")
            tokens: list[float] = []
            client = asyncio.create_task(_stream(service.url, tokens))
            verdict = await _until_stalled(host, service, tokens, say, as_json)
            return 0 if verdict is not None else 1
        finally:
            if client is not None:
                client.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await client


async def _stream(url: str, tokens: list[float]) -> None:
    """One long streamed completion; the time of each chunk it gets."""
    import aiohttp

    body = {"prompt": "Tell me a very long story.", "max_tokens": 100000, "stream": True}
    with contextlib.suppress(aiohttp.ClientError):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/v1/models") as resp:
                models = await resp.json()
            body["model"] = models["data"][0]["id"]
            async with session.post(f"{url}/v1/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data:"):
                        tokens.append(time.time())


async def _until_stalled(host, service, tokens: list[float], say, as_json: bool):
    """status as the TUI reads it, every second, until the verdict is stalled; each reading printed."""
    from console.ops.serving import serving_line
    from console.ops.status import service_status
    from console.ops.views import ServingCache

    cache = ServingCache()
    started = time.monotonic()
    try:
        while time.monotonic() - started < STALL_AFTER_S + VERDICT_WAIT_S:
            st = await service_status(host, service, fresh_health=True)
            verdict = await cache.judge(host, service, st)
            code = st.health.http_status if st.health else None
            states = ", ".join(f"{s.sub}" for s in st.units if s.unit == st.active_unit)
            last = tokens[-1] if tokens else None
            if as_json:
                print_json({**st.to_json(), "event": "reading", "serving": verdict.to_json() if verdict else None,
                            "tokens": len(tokens), "last_token_at": last})
            else:
                say(f"   {time.monotonic() - started:5.1f} s: {len(tokens)} tokens, /health {code}, unit {states}, "
                    f"{serving_line(verdict)}")
            if verdict is not None and verdict.state == "stalled":
                after = time.time() - last if last else None
                if as_json:
                    print_json({"event": "verdict", "after_last_token_s": after, "http_status": code,
                                "ranks": list(verdict.ranks), "ranks_words": verdict.ranks_words})
                else:
                    say("")
                    say(f"   STALLED, {after:.1f} s after the last token, while /health answers {code}:")
                    say(f"   {verdict.reason}")
                    say(f"   ranks: {verdict.ranks_words}")
                    say("   vLLM's /health reads only whether its engine core process exited; its RPC timeout")
                    say("   (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS) is 300 s. status --json carries this as 'serving'.")
                return verdict
            await asyncio.sleep(1.0)
    finally:
        cache.close()
    say(f"   the console did not say stalled in {STALL_AFTER_S + VERDICT_WAIT_S:.0f} s")
    return None
