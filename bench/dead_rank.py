"""How fast is a dead or wedged worker named, while the head's /health answers 200? (issue 20)

On a service over two hosts running TP16 (DeepSeek-V3 on SGLang, 8 ranks a node), each round brings the
layout up, then either kills the worker's engine (kill -9: a death) or stops it (SIGSTOP: a wedge), and
measures, side by side:

- the console: `status` read as the TUI reads it, every `--refresh` seconds (its default poll, 1 s) at a
  random phase, as a console already open; the time from the event to the first reading whose group is
  dead (a death) or unresponsive (a wedge);
- the head's /health, read every 0.2 s from the event until 2 s after the console's verdict: the share
  of readings that were 200 (the field's case: all of them);
- the engine's own watchdog: SGLang's --watchdog-timeout (300 s by default), after which it would end the
  head; the ratio says how many times sooner the console knows.

Targets: the simulated two-host service (demo-a, demo-b on this machine) and the test hosts (tb1, tb2
over SSH, tests/hosts/units/sglang-ds3@.service, booted here as root); `--targets sim` for the first only.
The last line of output is one JSON object with death_median_s and wedge_median_s (over every target).

    .venv/bin/python bench/dead_rank.py [--rounds 5] [--refresh 1.0] [--targets sim,testbed]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from dead_rank_targets import SimTarget, Target, TestbedTarget

from console.ops.status import service_status
from console.ops.switch import READY, switch_layout

WATCHDOG_S = 300.0  # SGLang's --watchdog-timeout default
KINDS = {"death": ("dead", "SIGKILL"), "wedge": ("unresponsive", "SIGSTOP")}


async def one_round(target: Target, kind: str, refresh_s: float) -> tuple[float, float]:
    """(seconds from the event to the console's verdict, share of the head's /health readings that were 200)."""
    head, service = target.head, target.service
    up = await switch_layout(head, service, "TP16", timeout_s=180, restart_ready=True)
    if up.outcome != READY:
        raise SystemExit(f"bench: {target.name}: TP16 did not come up: {up.reason}")
    wanted, signal_name = KINDS[kind]
    event_at: list[float] = []
    verdict = asyncio.get_running_loop().create_future()
    health: list[bool] = []

    async def console() -> None:
        await asyncio.sleep(random.uniform(0, refresh_s))  # a console already open, at any phase
        while not verdict.done():
            status = await service_status(head, service)
            if event_at and status.group == wanted:
                verdict.set_result(time.monotonic() - event_at[0])
                return
            await asyncio.sleep(refresh_s)

    async def probe_health() -> None:
        probe = head.probes[service.name]
        while True:
            sample = await probe.probe()
            if event_at:
                health.append(sample.http_status == 200)
            await asyncio.sleep(0.2)

    tasks = [asyncio.create_task(console()), asyncio.create_task(probe_health())]
    try:
        await asyncio.sleep(random.uniform(0.5, 1.5))
        event_at.append(time.monotonic())
        await target.signal_worker(signal_name)
        after = await asyncio.wait_for(verdict, 60)
        await asyncio.sleep(2.0)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if kind == "wedge":
            await target.signal_worker("SIGCONT")
    return after, (sum(health) / len(health) if health else 0.0)


async def run_target(target: Target, rounds: int, refresh_s: float, say: Callable[[str], None]) -> dict:
    out: dict = {}
    for kind in KINDS:
        times, shares = [], []
        for i in range(rounds):
            after, share = await one_round(target, kind, refresh_s)
            times.append(after)
            shares.append(share)
            say(f"  {target.name:<8} {kind:<6} round {i + 1}: named after {after:.2f} s; head /health 200 in "
                f"{share:.0%} of its readings")  # fmt: skip
        out[kind] = {"median_s": statistics.median(times), "max_s": max(times), "health_200_share": min(shares)}
    await target.stop()
    return out


async def main(args: argparse.Namespace) -> int:
    def say(text: str) -> None:
        print(text, flush=True)

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="dead-rank-") as tmp:
        for name in args.targets.split(","):
            maker: Callable[[Path], Awaitable[Target | str]] = SimTarget.open if name == "sim" else TestbedTarget.open
            target = await maker(Path(tmp) / name)
            if isinstance(target, str):
                say(f"{name}: skipped ({target})")
                continue
            try:
                say(f"{name}: {target.describe()}")
                results[name] = await run_target(target, args.rounds, args.refresh, say)
            finally:
                await target.close()
    if not results:
        print("bench: no target could run", file=sys.stderr)
        return 1
    say("")
    say(f"{'target':<9}{'event':<8}{'console median':>16}{'max':>8}{'head /health 200':>18}{'watchdog / console':>20}")
    for name, figures in results.items():
        for kind, f in figures.items():
            say(f"{name:<9}{kind:<8}{f['median_s']:>14.2f} s{f['max_s']:>6.2f} s{f['health_200_share']:>17.0%}"
                f"{WATCHDOG_S / f['median_s']:>19.0f}x")  # fmt: skip
    all_death = [f["death"]["median_s"] for f in results.values()]
    all_wedge = [f["wedge"]["median_s"] for f in results.values()]
    print(json.dumps({
        "bench": "dead_rank", "refresh_s": args.refresh, "rounds": args.rounds, "baseline": "head /health and the "
        "engine watchdog", "watchdog_s": WATCHDOG_S, "death_median_s": round(max(all_death), 3),
        "wedge_median_s": round(max(all_wedge), 3), "targets": results,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--refresh", type=float, default=1.0, help="the console's poll (the TUI's refresh_s)")
    parser.add_argument("--targets", default="sim,testbed")
    sys.exit(asyncio.run(main(parser.parse_args())))
