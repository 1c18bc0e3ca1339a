"""How soon is a failure an alert in Alertmanager? The watch daemon against the operator's 15 s loop.

Three parts, in one run:

- **Failure:** on simulated hosts, each round starts TP4 EP2, which dies of its CUDA OOM. `serve-console
  watch` (the daemon, at its default 5 s reading and 60 s re-send) runs over them with a real Alertmanager
  (Debian's `prometheus-alertmanager`, tests/alertmanager.py). Measured: the time from the engine's fatal
  line (its journal entry) to the alert being visible in Alertmanager's API (`GET /api/v2/alerts`, polled
  every 20 ms). Side by side, the operator's loop watches the same start (bench/detect_latency.py's
  `seed_loop`: every 15 s `is-active`, then `/v1/models`, at a random phase): it raises no alert at all,
  so its verdict time is a floor under any alert it could have sent.
- **Crash loop:** a unit with `Restart=always` (`RestartSec=0.1`) that dies every time; measured from the
  journal's `Started` line of its Nth restart (N = 3, the default threshold) to the crash-loop alert in
  Alertmanager's API. The operator's loop never names a crash loop (and while a restart runs, `is-active`
  says active).
- **Memory over a day:** the rules, the book, the state file and the outbox fed 24 simulated hours of
  events for 20 hosts in a few seconds of real time (a unit crash-looping all day, failures that resolve
  every hour, KV usage high, /health flapping, hosts unreachable, Alertmanager down for 4 hours so the
  queue reaches its bound): tracemalloc's current size and the RSS at hours 1, 6, 12, 18 and 24.

The last line is one JSON object: `source` "alertmanager", `alert_median_s`, `crash_loop_median_s`,
`seed_floor_median_s`, the ratio, and the memory figures.

    .venv/bin/python bench/alert_latency.py [--rounds 8] [--crash-rounds 5] [--time-scale 0.02] [--period 15]
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
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from alert_memory import memory_day  # noqa: E402
from alertmanager import Alertmanager, Capture, missing_reason  # noqa: E402
from detect_latency import seed_loop  # noqa: E402
from sim_fixtures import SimHosts, sim_host_config  # noqa: E402

from console.cli import interrupt_on_termination  # noqa: E402
from console.config import ConsoleConfig, WatchConfig  # noqa: E402
from console.domain.alerts import CRASH_LOOP, ENGINE_FAILED  # noqa: E402
from console.ops.watch import AlertStore, WatchDaemon, build_sinks  # noqa: E402

OOM_UNIT = "sim-k26@tp4ep2.service"
FATAL_NEEDLE = "CUDA out of memory"
POLL_S = 0.02


def am_alerts(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/api/v2/alerts", timeout=5) as resp:
        return json.loads(resp.read())


async def visible(url: str, alertname: str, host: str, timeout_s: float = 120.0) -> float:
    """When an alert of `alertname` on `host` shows in Alertmanager's API (POSIX seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(am_alerts, url)
        if any(a["labels"].get("alertname") == alertname and a["labels"].get("host") == host for a in found):
            return time.time()
        await asyncio.sleep(POLL_S)
    raise RuntimeError(f"{alertname} on {host} not in Alertmanager after {timeout_s:g} s")


async def journal(host, unit: str) -> list:
    return [e async for e in host.services.journal(unit, follow=False)]


async def failure_round(host, am_url: str, period_s: float) -> dict:
    service = host.config.services[0]
    first_check_s = random.uniform(0.0, period_s)
    await host.services.start(OOM_UNIT)
    loop = asyncio.create_task(seed_loop(host, OOM_UNIT, service.url, first_check_s=first_check_s, period_s=period_s))
    seen_at = await visible(am_url, ENGINE_FAILED, host.name)
    verdict = await loop
    fatal = next(e.ts for e in await journal(host, OOM_UNIT) if FATAL_NEEDLE in e.message)
    return {"alert_s": seen_at - fatal, "seed_s": verdict.at - fatal, "seed_verdict": verdict.verdict}


async def crash_round(host, am_url: str, restarts: int) -> dict:
    await host.services.write_file(f"/etc/systemd/system/{OOM_UNIT}.d/restart.conf",
                                   "[Service]\nRestart=always\nRestartSec=0.1\n")
    await host.services.daemon_reload()
    await host.services.start(OOM_UNIT)
    seen_at = await visible(am_url, CRASH_LOOP, host.name)
    await host.services.stop(OOM_UNIT)
    restarted, died = [], False
    for entry in await journal(host, OOM_UNIT):
        if entry.source == "systemd" and "Main process exited" in entry.message:
            died = True
        elif entry.source == "systemd" and entry.message.startswith("Started ") and died:
            restarted.append(entry.ts)
            died = False
    return {"alert_s": seen_at - restarted[restarts - 1], "restarts_seen": len(restarted)}


async def latency(args: argparse.Namespace, work: Path) -> tuple[list[dict], list[dict]]:
    capture = Capture()
    (work / "alertmanager").mkdir()
    am = Alertmanager(work / "alertmanager", capture.url)
    am.start()
    sims = SimHosts(work / "state")
    try:
        fails = [sims(sim_host_config(f"fail-{i}", time_scale=args.time_scale)) for i in range(args.rounds)]
        loops = [sims(sim_host_config(f"loop-{i}", time_scale=args.time_scale)) for i in range(args.crash_rounds)]
        hosts = fails + loops
        watch = WatchConfig(alertmanagers=(am.url,))  # the defaults: 5 s readings, 60 s re-sends, 3 restarts
        config = ConsoleConfig(path=work / "hosts.toml", hosts=tuple(h.config for h in hosts), watch=watch)
        store = AlertStore(work / "audit.sqlite3")
        daemon = WatchDaemon(hosts, config, store, build_sinks(watch, {}), say=lambda line: None)
        task = asyncio.create_task(daemon.run())
        await asyncio.sleep(watch.interval_s + 1)  # its first reading: every unit followed
        failures = []
        for i, host in enumerate(fails):
            failures.append(await failure_round(host, am.url, args.period))
            print(f"failure {i + 1}/{args.rounds}: alert {failures[-1]['alert_s']:.3f} s, "
                  f"seed loop verdict {failures[-1]['seed_s']:.2f} s", flush=True)
        crashes = []
        for i, host in enumerate(loops):
            crashes.append(await crash_round(host, am.url, watch.thresholds.crash_loop_restarts))
            print(f"crash loop {i + 1}/{args.crash_rounds}: alert {crashes[-1]['alert_s']:.3f} s after restart "
                  f"{watch.thresholds.crash_loop_restarts}", flush=True)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await daemon.close()
        store.close()
        return failures, crashes
    finally:
        await sims.close()
        am.stop()
        capture.close()


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="failed starts (default 8)")
    parser.add_argument("--crash-rounds", type=int, default=5, help="crash loops (default 5)")
    parser.add_argument("--time-scale", type=float, default=0.02, help="simulated engines' pace (default 0.02)")
    parser.add_argument("--period", type=float, default=15.0, help="the story loop's period, s (default 15)")
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours for the memory part")
    args = parser.parse_args()
    reason = missing_reason()
    if reason is not None:
        print(f"alert_latency: {reason}", file=sys.stderr)
        return 2
    interrupt_on_termination()
    with tempfile.TemporaryDirectory(prefix="alert-latency-") as tmp:
        failures, crashes = asyncio.run(latency(args, Path(tmp)))
        memory = memory_day(Path(tmp) / "day.sqlite3", hours=args.hours)
    alert = median([f["alert_s"] for f in failures])
    seed = median([f["seed_s"] for f in failures])
    crash = median([c["alert_s"] for c in crashes])
    print()
    print("| | watch daemon (alert in Alertmanager) | seed loop (verdict, no alert) | ratio |")
    print("|---|---|---|---|")
    print(f"| failed start, from the fatal line | median {alert:.3f} s (max {max(f['alert_s'] for f in failures):.3f} s) "
          f"| median {seed:.2f} s (max {max(f['seed_s'] for f in failures):.2f} s) | {seed / alert:.0f}x |")
    print(f"| crash loop, from restart {WatchConfig().thresholds.crash_loop_restarts} | median {crash:.3f} s "
          f"(max {max(c['alert_s'] for c in crashes):.3f} s) | never | - |")
    print(f"memory over {args.hours:g} simulated hours ({memory['hosts']} hosts, {memory['transitions']} transitions, "
          f"{memory['dropped']} deliveries dropped at the queue's bound, {memory['real_s']:.1f} s real): "
          f"tracemalloc " + ", ".join(f"h{h} {b / 2**20:.2f} MiB" for h, b in memory["traced_bytes"].items())
          + f"; growth after hour 6 {memory['growth_after_h6_bytes'] / 1024:.0f} KiB; RSS "
          + ", ".join(f"h{h} {r / 2**20:.1f} MiB" for h, r in memory["rss_bytes"].items()))
    print(json.dumps({
        "source": "alertmanager", "alert_median_s": round(alert, 4),
        "alert_max_s": round(max(f["alert_s"] for f in failures), 4),
        "crash_loop_median_s": round(crash, 4), "seed_floor_median_s": round(seed, 3),
        "ratio_vs_seed_floor": round(seed / alert, 1), "goal_median_s": 2.0, "goal_met": alert <= 2.0 and crash <= 2.0,
        "rounds": len(failures), "crash_rounds": len(crashes), "time_scale": args.time_scale,
        "memory": memory,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
