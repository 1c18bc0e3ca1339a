"""Fleet refresh through a real Prometheus for hundreds of hosts, against what the SSH path would cost.

    .venv/bin/python bench/fleet.py                        # 500 hosts x 8 GPUs, 30 refreshes
    SERVE_CONSOLE_FLEET_HOSTS=1000 SERVE_CONSOLE_FLEET_REFRESHES=50 .venv/bin/python bench/fleet.py

Needs Debian's `prometheus` package (prometheus + promtool). The fleet is synthetic and backfilled
(tests/fleet_prometheus.py): per host, dcgm-exporter's FB used/free and util for 8 GPUs, `up` for two
targets and one engine's running/waiting/KV/generation counter, 15 s apart over 15 minutes, with a
stale, a lagging, a down and a restarted host among them. Prometheus runs on loopback with a
temporary TSDB (not the system service). A refresh is what the fleet screen does: the GPU and engine
queries at once at the server's now (and, once a minute or when a host's series vanish, the last-seen
query beside them), every host's row built and turned into its JSON line. Measured per refresh: wall
time, the console's own CPU time (this process), and the Prometheus server's CPU time (from /proc);
then the TUI's fleet screen on the same server: CPU time of a refresh with every row shown and painted.

Baseline: the SSH path, from bench/fanout.py's cost per host (a status cycle over persistent
connections, GPUs from the `nvidia-smi -lms` stream), scaled linearly to the same host count. It reads
SERVE_CONSOLE_FANOUT_JSON (a file holding fanout's last line) when given, else the figures recorded in
docs/benchmarks.md. The last line is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fleet_prometheus import SyntheticFleet, backfill, missing_reason, prometheus_server  # noqa: E402

from console.config import FleetConfig, HostConfig  # noqa: E402
from console.ops.fleet.rows import PrometheusFleet  # noqa: E402

#: bench/fanout.py's recorded run (docs/benchmarks.md): 8 test hosts, console cycle median 54.6 ms,
#: the story's one-ssh-process-per-command cycle 2,470 ms.
FANOUT_RECORDED = {"hosts": 8, "console_median_s": 0.0546, "ssh_per_command_median_s": 2.47}


def fanout_baseline() -> tuple[dict, str]:
    path = os.environ.get("SERVE_CONSOLE_FANOUT_JSON")
    if not path:
        return FANOUT_RECORDED, "docs/benchmarks.md (recorded bench/fanout.py run)"
    lines = Path(path).read_text().strip().splitlines()
    return json.loads(lines[-1]), path


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc (clock ticks -> seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, server_pid: int, names: list[str], refreshes: int) -> dict[str, list[float]]:
    """Steady refreshes (GPUs + engines: two calls) interleaved with one in three that also asks the
    last-seen query (three calls), as the screen does once a minute or when a host vanishes."""
    hosts = [HostConfig(name=n) for n in names]  # as listed in hosts.toml: mapped, never connected
    fleet = PrometheusFleet(FleetConfig(prometheus=url), hosts)
    out: dict[str, list[float]] = {k: [] for k in ("wall", "cpu", "server_cpu", "seen_wall", "seen_cpu",
                                                   "seen_server_cpu")}
    try:
        for _ in range(3):  # warm-up: connection, Prometheus caches
            await fleet.rows()
        rows: list = []
        for i in range(refreshes + refreshes // 2):
            with_seen = i % 3 == 2
            if with_seen:
                fleet._seen_at = None  # the once-a-minute refresh, on demand
            before = fleet.seen_queries
            server_before, cpu_before, started = _cpu_s(server_pid), time.process_time(), time.perf_counter()
            rows = await fleet.rows()
            lines = [json.dumps(r.to_json()) for r in rows]
            prefix = "seen_" if with_seen else ""
            out[prefix + "wall"].append(time.perf_counter() - started)
            out[prefix + "cpu"].append(time.process_time() - cpu_before)
            out[prefix + "server_cpu"].append(_cpu_s(server_pid) - server_before)
            assert (fleet.seen_queries - before == 1) == with_seen
        assert len(lines) == len(names), (len(lines), len(names))
        out["stale"] = [float(sum(1 for r in rows if r.stale))]
    finally:
        await fleet.close()
    return out


async def measure_tui(url: str, names: list[str], refreshes: int) -> list[float]:
    """CPU seconds of the fleet screen's refresh: the same read, every row shown, the frame painted."""
    from console.config.model import ConsoleConfig
    from console.ui.app import ConsoleApp

    hosts = tuple(HostConfig(name=n) for n in names)
    config = ConsoleConfig(path=Path("hosts.toml"), hosts=hosts, fleet=FleetConfig(prometheus=url))
    app = ConsoleApp([], config=config, auto_open=False)  # no Host objects: nothing could open SSH
    out: list[float] = []
    async with app.run_test(size=(140, 50)) as pilot:
        table = app.screen.query_one("#fleet-table")
        for _ in range(200):
            await pilot.pause(0.05)
            if len(table.summaries) >= len(names):
                break
        for _ in range(refreshes):
            before = time.process_time()
            for summary in await table.fetch_all():
                table.show(summary)
            await pilot.pause()  # the repaint
            out.append(time.process_time() - before)
    return out


def main() -> int:
    if (reason := missing_reason()) is not None:
        sys.exit(f"fleet: {reason}")
    count = int(os.environ.get("SERVE_CONSOLE_FLEET_HOSTS", "500"))
    refreshes = int(os.environ.get("SERVE_CONSOLE_FLEET_REFRESHES", "30"))
    with tempfile.TemporaryDirectory(prefix="serve-console-fleet-") as tmp:
        synthetic = SyntheticFleet(hosts=count, end=time.time() - 1)
        data = Path(tmp) / "data"
        backfill_s = backfill(synthetic, data)
        with prometheus_server(data) as server:
            runs = asyncio.run(measure(server.url, server.pid, synthetic.names, refreshes))
            runs["tui_cpu"] = asyncio.run(measure_tui(server.url, synthetic.names, max(5, refreshes // 3)))
    med = {k: statistics.median(v) for k, v in runs.items()}
    wall, cpu, server_cpu = med["wall"], med["cpu"], med["server_cpu"]
    base, source = fanout_baseline()
    per_host_s = base["console_median_s"] / base["hosts"]
    ssh_s = per_host_s * count
    seed_s = base["ssh_per_command_median_s"] / base["hosts"] * count
    series = count * (synthetic.gpus * 3 + 2 + 4)
    print(f"fleet through Prometheus: {count} hosts ({series:,} series, backfilled in {backfill_s:.1f} s), "
          f"{len(runs['wall'])} steady refreshes (2 concurrent HTTP calls) and {len(runs['seen_wall'])} "
          "with the last-seen query (3)")
    for label, prefix in (("steady refresh", ""), ("refresh with last-seen", "seen_")):
        walls = runs[prefix + "wall"]
        print(f"  {label:<24} median {med[prefix + 'wall'] * 1000:7.1f} ms (min {min(walls) * 1000:.1f}, "
              f"max {max(walls) * 1000:.1f}); console CPU {med[prefix + 'cpu'] * 1000:.1f} ms, "
              f"Prometheus CPU {med[prefix + 'server_cpu'] * 1000:.1f} ms")
    print(f"  the TUI's fleet screen (read, {count} rows shown, repaint): console CPU median "
          f"{med['tui_cpu'] * 1000:.1f} ms per refresh")
    print(f"  stale or down hosts shown as such: {int(runs['stale'][0])}")
    print(f"  SSH path for {count} hosts, from bench/fanout.py ({source}): {per_host_s * 1000:.2f} ms/host "
          f"-> {ssh_s:.2f} s per refresh and {count} SSH connections; ratio {ssh_s / wall:.1f}x "
          f"({ssh_s / med['seen_wall']:.1f}x against a refresh with last-seen)")
    print(f"  the story's ssh-per-command at {count} hosts: {seed_s:.0f} s per refresh; ratio {seed_s / wall:.0f}x")
    print(json.dumps({
        "bench": "fleet", "source": "prometheus", "hosts": count, "refresh_median_s": round(wall, 4),
        "cpu_s_per_refresh": round(cpu, 4), "server_cpu_s_per_refresh": round(server_cpu, 4),
        "refresh_max_s": round(max(runs["wall"]), 4), "refreshes": len(runs["wall"]), "http_calls_per_refresh": 2,
        "with_seen_refresh_median_s": round(med["seen_wall"], 4), "with_seen_cpu_s": round(med["seen_cpu"], 4),
        "with_seen_server_cpu_s": round(med["seen_server_cpu"], 4), "with_seen_refreshes": len(runs["seen_wall"]),
        "tui_cpu_s_per_refresh": round(med["tui_cpu"], 4),
        "series": series, "ssh_estimate_s_per_refresh": round(ssh_s, 3), "ratio_vs_ssh": round(ssh_s / wall, 1),
        "seed_ssh_estimate_s_per_refresh": round(seed_s, 1), "ratio_vs_seed": round(seed_s / wall, 0),
        "ssh_baseline": source,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
