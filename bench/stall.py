"""From the last token to "stalled": how soon a live, HTTP-answering, non-generating engine is named (issue 26).

Each round brings a simulated engine up, streams one long completion, and lets the engine stall a few
seconds in, in one of the real shapes (console/sim/stall.py): the scheduler blocked (`stall`), every rank
spinning in a collective (`spin`), one rank diverged (`diverged`). It measures, side by side:

- the console: status read as the TUI reads it (the service pane's poll: one /metrics scrape against the
  last, the canary when due), every `--refresh` seconds at a random phase; the time from the client's last
  token to the first reading that says stalled, at the defaults (stall_after_s 20 s);
- the engine's /health, read on every reading: the share that answered 200 (vLLM: all of them; SGLang:
  200 until its one-token check has waited SGLANG_HEALTH_CHECK_TIMEOUT, then 503);
- the operator's loop (every 15 s: `systemctl is-active`, then GET /v1/models): whether both still pass at
  the verdict (then it never fires);
- the engines' own watchdogs: 300 s (vLLM's VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, SGLang's --watchdog-timeout).

Then a false-alarm run at a fast time scale (`--fast`, default 0.05): every duration of the model (stall
after, canary every, canary timeout, the reading interval) multiplied by it, against an idle engine for an
hour of scaled time, and ten scaled minutes of long chunked prefills back to back (each 8 chunks of 6 s,
scaled: 48 s without a token, against stall_after_s 20 s), slow, not stalled.
The last line is one JSON object with stall_median_s and false_alarms.

    .venv/bin/python bench/stall.py [--rounds 2] [--refresh 1.0] [--fast 0.02] [--engines vllm,sglang]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from sim_fixtures import free_port  # noqa: E402

from console.config import parse_config  # noqa: E402
from console.factory import open_hosts  # noqa: E402
from console.ops.serving import ServingWatch  # noqa: E402
from console.ops.status import service_status  # noqa: E402
from console.ops.switch import READY, stop_service, switch_layout  # noqa: E402
from console.ops.views import ServingCache  # noqa: E402
from console.sim.engine_args import FAIL_ENV  # noqa: E402
from console.sim.stall import PREFILL_CHUNK_S_ENV, STALL_AFTER_ENV  # noqa: E402

WATCHDOG_S = 300.0
SEED_LOOP_S = 15.0
STALL_AFTER_S = 3.0  # real seconds of serving before the engine stalls
SHAPES = ("stall", "spin", "diverged")
MODEL = REPO / "console" / "sim" / "models" / "Qwen--Qwen3-235B-A22B-FP8.json"
CONFIG = """
[hosts.bench-{engine}]
transport = "sim"
gpus = "sim"
time_scale = 0.03
[hosts.bench-{engine}.sim]
gpu_count = 4
gpu_total_mib = 81559
gpu_name = "NVIDIA H100 80GB HBM3"
[hosts.bench-{engine}.services.qwen3]
engine = "{engine}"
url = "http://127.0.0.1:{port}"
template = "bench-qwen3@.service"
model_config = "{model}"
layouts = ["TP4"]
"""


def open_bench_host(engine: str, state_dir: Path):
    text = CONFIG.format(engine=engine, port=free_port(), model=MODEL)
    config = parse_config(text.encode(), "hosts.toml", base_dir=state_dir)
    (host,) = open_hosts(config, state_dir=state_dir, stop_units_on_close=True)
    return host, host.config.services[0]


async def stream(url: str, tokens: list[float], max_tokens: int = 100000, prompt: str = "Tell me a story.") -> None:
    import aiohttp

    with contextlib.suppress(aiohttp.ClientError):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/v1/models") as resp:
                model = (await resp.json())["data"][0]["id"]
            body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True}
            async with session.post(f"{url}/v1/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data:") and b'"text":""' not in line.replace(b" ", b""):
                        tokens.append(time.time())


async def seed_loop_passes(host, service, unit: str) -> bool:
    """The story's check: `systemctl is-active` and GET /v1/models, both passing."""
    import aiohttp

    active = (await host.services.state(unit)).is_running
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
            async with s.get(f"{service.url}/v1/models") as resp:
                return active and resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def stall_round(engine: str, shape: str, refresh_s: float, state_dir: Path) -> dict:
    os.environ[FAIL_ENV] = shape
    os.environ[STALL_AFTER_ENV] = repr(STALL_AFTER_S)
    host, service = open_bench_host(engine, state_dir)
    unit = service.unit_for(service.layouts[0])
    try:
        up = await switch_layout(host, service, "TP4", timeout_s=240, restart_ready=True)
        if up.outcome != READY:
            raise SystemExit(f"bench: {engine} TP4 did not come up: {up.reason}")
        tokens: list[float] = []
        client = asyncio.create_task(stream(service.url, tokens))
        cache = ServingCache()
        codes: list[int | None] = []
        await asyncio.sleep(random.uniform(0, refresh_s))  # a console already open, at any phase
        deadline = time.monotonic() + STALL_AFTER_S + 120
        try:
            while time.monotonic() < deadline:
                st = await service_status(host, service, fresh_health=True)
                verdict = await cache.judge(host, service, st)
                codes.append(st.health.http_status if st.health else None)
                if verdict is not None and verdict.state == "stalled" and tokens:
                    after = time.time() - tokens[-1]
                    seed_ok = await seed_loop_passes(host, service, unit)
                    return {"engine": engine, "shape": shape, "after_s": after, "ranks": verdict.ranks_words,
                            "health_200": codes.count(200) / len(codes), "codes": sorted({c for c in codes if c}),
                            "seed_loop_passes": seed_ok}
                await asyncio.sleep(refresh_s)
            raise SystemExit(f"bench: {engine} {shape}: never named stalled")
        finally:
            cache.close()
            client.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await client
    finally:
        with contextlib.suppress(Exception):
            await stop_service(host, service)
        await host.close()
        os.environ.pop(FAIL_ENV, None)


async def false_alarm_run(engine: str, kind: str, fast: float, state_dir: Path) -> dict:
    """An idle hour, or long prefills back to back, with every duration of the model scaled by `fast`."""
    if kind == "long_prefill":
        os.environ[FAIL_ENV] = "long_prefill"
        os.environ[PREFILL_CHUNK_S_ENV] = repr(6.0 * fast)  # 8 chunks of 6 s each, scaled
    host, service = open_bench_host(engine, state_dir)
    service = dataclasses.replace(service, stall_after_s=20.0 * fast, canary_every_s=60.0 * fast,
                                  canary_timeout_s=20.0 * fast)
    alarms, readings, canaries = 0, 0, 0
    try:
        up = await switch_layout(host, service, "TP4", timeout_s=240, restart_ready=True)
        if up.outcome != READY:
            raise SystemExit(f"bench: {engine} TP4 did not come up: {up.reason}")
        watch = ServingWatch(service)
        span_s = 3600.0 * fast if kind == "idle" else 600.0 * fast  # an idle hour; ten minutes of prefills
        client = None
        if kind == "long_prefill":
            async def prefills() -> None:
                while True:  # one long prompt after another, each a few tokens long
                    await stream(service.url, [], max_tokens=4, prompt="x" * 40000)
            client = asyncio.create_task(prefills())
        started = time.monotonic()
        from console.ops.engine_status import engine_readings

        try:
            while time.monotonic() - started < span_s:
                st = await service_status(host, service)
                _, _, scrapes = await engine_readings(host, service, running=st.active_unit is not None,
                                                      interval_s=0.01)
                verdict = watch.observe(st, scrapes[-1:], host.probes.get(service.name))
                readings += 1
                alarms += verdict.state == "stalled"
                await asyncio.sleep(1.0 * fast)  # the TUI's 1 s poll, scaled
            canaries = watch.canaries_sent
        finally:
            watch.close()
            if client is not None:
                client.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await client
    finally:
        with contextlib.suppress(Exception):
            await stop_service(host, service)
        await host.close()
        os.environ.pop(FAIL_ENV, None)
        os.environ.pop(PREFILL_CHUNK_S_ENV, None)
    return {"engine": engine, "run": kind, "readings": readings, "false_alarms": alarms, "canaries": canaries}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--refresh", type=float, default=1.0, help="seconds between the console's readings")
    parser.add_argument("--fast", type=float, default=0.05, help="time scale of the false-alarm runs")
    parser.add_argument("--engines", default="vllm,sglang")
    args = parser.parse_args()
    engines = args.engines.split(",")
    rows, alarms = [], []
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as tmp:
        os.environ["SERVE_CONSOLE_STATE_DIR"] = tmp
        for engine in engines:
            for shape in SHAPES:
                for _ in range(args.rounds):
                    row = await stall_round(engine, shape, args.refresh, Path(tmp))
                    rows.append(row)
                    print(f"{engine:6} {shape:8} stalled named {row['after_s']:5.1f} s after the last token; "
                          f"/health 200 in {100 * row['health_200']:.0f}% of readings {row['codes']}; "
                          f"seed loop passes: {row['seed_loop_passes']}; {row['ranks']}", flush=True)
        for engine in engines:
            for kind in ("idle", "long_prefill"):
                result = await false_alarm_run(engine, kind, args.fast, Path(tmp))
                alarms.append(result)
                span = "a scaled hour" if kind == "idle" else "ten scaled minutes"
                print(f"{engine:6} {kind:12} {result['readings']} readings over {span}, "
                      f"{result['false_alarms']} false alarms, {result['canaries']} canaries", flush=True)
    times = [r["after_s"] for r in rows]
    median = statistics.median(times)
    print(f"stall named: median {median:.1f} s after the last token (max {max(times):.1f} s); the engines' "
          f"watchdogs {WATCHDOG_S:.0f} s: {WATCHDOG_S / median:.0f}x; the story loop never fires "
          f"({sum(r['seed_loop_passes'] for r in rows)}/{len(rows)} passing at the verdict)")
    print(json.dumps({"stall_median_s": round(median, 2), "stall_max_s": round(max(times), 2),
                      "by_shape": {f"{r['engine']}/{r['shape']}": round(r["after_s"], 2) for r in rows},
                      "health_200_share": round(statistics.mean(r["health_200"] for r in rows), 3),
                      "seed_loop_fires": sum(not r["seed_loop_passes"] for r in rows),
                      "watchdog_s": WATCHDOG_S, "false_alarms": sum(a["false_alarms"] for a in alarms),
                      "false_alarm_readings": sum(a["readings"] for a in alarms)}))


if __name__ == "__main__":
    asyncio.run(main())
