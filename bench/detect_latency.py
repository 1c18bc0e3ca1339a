"""How fast is a failed or a ready start known? The console's switch against the operator's 15 s loop.

Both watch the same starts on the simulated demo host, side by side in one run:

- the console: `switch_layout`, watching journal, unit state and health at once;
- the operator's loop, reimplemented faithfully: every 15 s (real seconds, whatever the time scale), the
  host's `is-active` for the unit, then an HTTP GET of `/v1/models`; not active means failed, a 200 from
  `/v1/models` means ready. Its first check falls at a random point of its 15 s period after the start, as
  for an operator's loop already running.

Each round starts EP8 (ready) and then TP4 EP2 forced (the story's OOM). For each watcher it reports the
time from the engine's death (its fatal error line, or systemd's `Main process exited` entry when that
comes first) to the failure verdict, and from the
engine's real ready line (`The server is fired up and ready to roll!`) to the ready verdict; a negative
time means a verdict before the event. It counts how often the loop declares ready early, on `/v1/models`.
The last line of output is one JSON object with the figures and the ratios.

    .venv/bin/python bench/detect_latency.py [--rounds 8] [--time-scale 0.1] [--period 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp

from console.cli import interrupt_on_termination
from console.config import HostConfig, demo_config_path, load_config
from console.hosts.base import Host
from console.ops.switch.events import StepEvent, SwitchEvent
from console.ops.switch.orchestrate import switch_layout
from console.sim.host.build import build_sim_host

READY_LINE = "The server is fired up and ready to roll!"
DEATH_LINE = "Main process exited"
HTTP_UP_LINE = "Uvicorn running on"


@dataclass
class LoopVerdict:
    verdict: str
    at: float
    checks: int


async def seed_loop(host: Host, unit: str, url: str, *, first_check_s: float, period_s: float) -> LoopVerdict:
    """The operator's loop: every `period_s`, `systemctl is-active UNIT`, then `curl URL/v1/models`."""
    start = time.monotonic()
    checks = 0
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            await asyncio.sleep(max(0.0, start + first_check_s + checks * period_s - time.monotonic()))
            checks += 1
            if (await host.services.state(unit)).active != "active":
                return LoopVerdict("failed", time.time(), checks)
            try:
                async with session.get(f"{url}/v1/models") as resp:
                    if resp.status == 200:
                        return LoopVerdict("ready", time.time(), checks)
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass


async def event_ts(host: Host, unit: str, needle: str, after: float) -> float | None:
    """When the newest journal entry of `unit` containing `needle` was logged (after `after`)."""
    found = None
    async for entry in host.services.journal(unit, follow=False, lines=2000):
        if needle in entry.message and entry.ts >= after:
            found = entry.ts
    return found


async def one_start(host: Host, layout: str, *, force: bool, period_s: float) -> dict:
    """Switch to `layout` with the console while the operator's loop watches the same start."""
    service = host.config.services[0]
    unit = service.unit_for(service.layout(layout))
    loop_task: list[asyncio.Task] = []
    first_check_s = random.uniform(0.0, period_s)

    def on_event(event: SwitchEvent) -> None:
        # The loop starts when the unit has been started, as the operator ran it after `systemctl start`.
        if isinstance(event, StepEvent) and event.step == "watch" and not loop_task:
            loop_task.append(
                asyncio.create_task(
                    seed_loop(host, unit, service.url, first_check_s=first_check_s, period_s=period_s)
                )
            )

    began = time.time()
    result = await switch_layout(
        host, service, layout, force=force, rollback=False, timeout_s=300, on_event=on_event
    )
    loop = await asyncio.wait_for(loop_task[0], timeout=period_s * 3 + 300)
    needle = READY_LINE if result.outcome == "ready" else DEATH_LINE
    event_at = await event_ts(host, unit, needle, began)
    exit_at = event_at
    http_up_at = await event_ts(host, unit, HTTP_UP_LINE, began) if result.outcome == "ready" else None
    if result.outcome == "failed" and result.failure is not None and result.failure.ts is not None:
        # The engine died with its fatal error line; the process exit follows a few ms later.
        event_at = min(result.failure.ts, event_at or result.failure.ts)
    return {
        "layout": layout,
        "console": result.outcome,
        "loop": loop.verdict,
        "event_at": event_at,
        "console_s": None if event_at is None else result.verdict_at - event_at,
        "console_detected_after_s": result.detected_after_s,
        "loop_s": None if event_at is None else loop.at - event_at,
        "loop_checks": loop.checks,
        "warmup_window_s": None if http_up_at is None or event_at is None else event_at - http_up_at,
        "console_after_exit_s": None if exit_at is None else result.verdict_at - exit_at,
        "loop_early": loop.verdict == "ready" and event_at is not None and loop.at < event_at,
    }


def demo_host(time_scale: float, state_root: Path) -> Host:
    config = load_config(demo_config_path())
    cfg: HostConfig = config.hosts[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = replace(cfg.services[0], url=f"http://127.0.0.1:{port}")
    cfg = replace(cfg, sim=replace(cfg.sim, time_scale=time_scale), services=(service,))
    return build_sim_host(cfg, state_root)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(slow: float | None, fast: float | None) -> float | None:
    if slow is None or fast is None:
        return None
    return slow / max(fast, 0.001)  # floored at 1 ms, the journal's timing resolution here


async def main(rounds: int, time_scale: float, period_s: float) -> dict:
    import os

    os.environ.pop("SERVE_CONSOLE_SIM_TIME_SCALE", None)  # this run's time scale is the one given
    with tempfile.TemporaryDirectory(prefix="serve-console-bench-") as tmp:
        host = demo_host(time_scale, Path(tmp))
        rows: list[dict] = []
        try:
            for i in range(rounds):
                for layout, force in (("EP8", False), ("TP4 EP2", True)):
                    row = await one_start(host, layout, force=force, period_s=period_s)
                    rows.append(row)
                    fmt = lambda v: "   n/a" if v is None else f"{v:6.2f}"  # noqa: E731
                    print(
                        f"round {i + 1} {layout:<8} console {row['console']:<7} {fmt(row['console_s'])} s   "
                        f"loop {row['loop']:<7} {fmt(row['loop_s'])} s ({row['loop_checks']} checks)"
                        f"{'  EARLY on /v1/models' if row['loop_early'] else ''}",
                        flush=True,
                    )
        finally:
            await host.services.stop_all()
            await host.close()
    fails = [r for r in rows if r["layout"] == "TP4 EP2" and r["console_s"] is not None]
    readies = [r for r in rows if r["layout"] == "EP8" and r["console_s"] is not None]
    out = {
        "bench": "detect_latency",
        "rounds": rounds,
        "time_scale": time_scale,
        "loop_period_s": period_s,
        "console_fail_median_s": median([r["console_s"] for r in fails]),
        "loop_fail_median_s": median([r["loop_s"] for r in fails]),
        "loop_fail_max_s": max((r["loop_s"] for r in fails), default=None),
        "console_fail_after_exit_median_s": median(
            [r["console_after_exit_s"] for r in fails if r["console_after_exit_s"] is not None]
        ),
        "console_ready_median_s": median([r["console_s"] for r in readies]),
        "loop_ready_median_s": median([r["loop_s"] for r in readies]),
        "loop_early_ready": sum(r["loop_early"] for r in readies),
        "warmup_window_median_s": median(
            [r["warmup_window_s"] for r in readies if r["warmup_window_s"] is not None]
        ),
        "ready_starts": len(readies),
        "console_fail_outcomes_ok": all(r["console"] == "failed" for r in fails),
        "console_ready_outcomes_ok": all(r["console"] == "ready" for r in readies),
    }
    out["fail_ratio"] = ratio(out["loop_fail_median_s"], out["console_fail_median_s"])
    late_loop_ready = [r["loop_s"] for r in readies if not r["loop_early"]]
    out["ready_ratio"] = ratio(median(late_loop_ready), out["console_ready_median_s"])
    return out


def report(out: dict) -> None:
    def s(v):
        return "n/a" if v is None else f"{v:.3f} s"

    print()
    print(f"failure verdict after the engine's death: console median {s(out['console_fail_median_s'])}, "
          f"seed loop median {s(out['loop_fail_median_s'])} (max {s(out['loop_fail_max_s'])})")  # fmt: skip
    print(f"  (console verdict relative to the process exit itself: median {s(out['console_fail_after_exit_median_s'])}; "
          "negative means it knew before the process was gone)")  # fmt: skip
    print(f"ready verdict after the engine's ready line: console median {s(out['console_ready_median_s'])}, "
          f"seed loop median {s(out['loop_ready_median_s'])}")  # fmt: skip
    print(f"the story loop declared ready early (on /v1/models, before the ready line): "
          f"{out['loop_early_ready']} of {out['ready_starts']} starts")  # fmt: skip
    window = out["warmup_window_median_s"]
    if window is not None:
        real = window / out["time_scale"]
        print(f"  /v1/models answers {window:.3f} s before the ready line here ({real:.1f} s at the story's pace): "
              f"a {out['loop_period_s']:g} s loop declares ready early in about {min(1.0, real / out['loop_period_s']):.0%} "
              "of real starts")  # fmt: skip
    fr, rr = out["fail_ratio"], out["ready_ratio"]
    print(f"ratio (loop / console): failure {'n/a' if fr is None else f'{fr:.0f}x'}, "
          f"ready {'n/a' if rr is None else f'{rr:.0f}x'} (ready: the loop's late verdicts only)")  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="EP8 + TP4 EP2 starts per watcher (default 8)")
    parser.add_argument(
        "--time-scale", type=float, default=0.1, help="the simulated engine's pace (default 0.1)"
    )
    parser.add_argument("--period", type=float, default=15.0, help="the story loop's period in s (default 15)")
    args = parser.parse_args()
    interrupt_on_termination()  # `timeout` and a closed terminal end it as Ctrl-C does: its units stopped
    try:
        report(asyncio.run(main(args.rounds, args.time_scale, args.period)))
    except KeyboardInterrupt:
        sys.exit(130)
