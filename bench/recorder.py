"""What the rolling record costs the watch daemon (docs/recorder.md): CPU and bytes per host-hour.

Simulated time, one host, 8 units each logging 100 lines/s (a serving engine's journal: decode batches,
access logs, throughput lines, with a start-up's lines from tests/fixtures/logs mixed in), read every
`interval_s` (5 s) as the daemon reads a service: its units' states, /health, the engine's /metrics and
the GPUs. Side by side:

- baseline: the daemon's own work per line without a record (what the journal hub does to every entry:
  `PhaseTracker.feed` and `Triager.feed`);
- recorder: the same plus the record (`HostRecording`, as the daemon feeds it, flushed each simulated
  second into real files under a temporary folder).

Printed: CPU seconds of each (this process's), their ratio, the record's CPU per sample and its share of
one core at the simulated rate, bytes per host-hour, and the time to cut a 12-minute bundle from the
record. The last line is one JSON object with `cpu_overhead_pct`, `mib_per_host_hour`, `bundle_write_s`.

    .venv/bin/python bench/recorder.py [--seconds 600] [--rate 100] [--units 8]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from console.domain.phases import PhaseTracker
from console.domain.triage import Triager
from console.domain.values import Engine, GpuSample, GpuSnapshot, HealthSample, JournalEntry, UnitState
from console.ops.bundle import Incident, read_bundle
from console.ops.recorder import folder_size, write_incident_bundle
from console.ops.watch import HostRecording

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs" / "vllm_ep_oom.log"
T0 = 1_800_000_000.0


def _lines(rng: random.Random) -> list[str]:
    ordinary = [
        "INFO {t} [loggers.py:116] Engine 000: Avg prompt throughput: {a:.1f} tokens/s, Avg generation throughput: "
        "{b:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: {k:.1f}%, Prefix cache hit rate: 41.2%",
        'INFO:     10.0.3.{r}:5{a:.0f} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "[{t}] Decode batch. #running-req: {r}, #token: {a:.0f}, token usage: 0.{r:02d}, gen throughput (token/s): {b:.2f}",
    ]
    start = FIXTURE.read_text(errors="replace").splitlines()[:200] if FIXTURE.exists() else []
    out = []
    for i in range(4000):
        if start and i % 40 == 0:
            out.append(start[(i // 40) % len(start)])
            continue
        out.append(rng.choice(ordinary).format(t=f"12-02 03:{i % 60:02d}:{i % 60:02d}", a=rng.uniform(0, 9e3),
                                               b=rng.uniform(0, 4e3), r=rng.randint(1, 99), k=rng.uniform(0, 99)))
    return out


def _run(seconds: int, rate: int, units: int, record: Path | None) -> dict[str, float]:
    rng = random.Random(7)
    lines = _lines(rng)
    clock = [T0]
    rec = HostRecording(record, 64 << 20, clock=lambda: clock[0]) if record is not None else None
    names = [f"llm@layout{u}.service" for u in range(units)]
    trackers = [(PhaseTracker(Engine.VLLM), Triager(Engine.VLLM)) for _ in names]
    gpus = GpuSnapshot(taken_at=T0, gpus=tuple(GpuSample(index=i, total_mib=81559, used_mib=70000 + i, util_pct=97,
                                                         temp_c=61, power_w=612.0) for i in range(8)))
    scrape = SimpleNamespace(running_requests=12.0, waiting_requests=0.0, kv_cache_usage=0.41,
                             prompt_tokens_total=1e6, generation_tokens_total=2e6, preemptions_total=0.0,
                             cache_hit_rate=None)
    health = HealthSample(taken_at=T0, status="ready", http_status=200, latency_s=0.002)
    samples, n = 0, 0
    cpu0 = time.process_time()
    for second in range(seconds):
        for step in range(rate):
            clock[0] = T0 + second + step / rate
            for u, unit in enumerate(names):
                entry = JournalEntry(cursor=f"c{n}", ts=clock[0], unit=unit, message=lines[n % len(lines)], pid=100 + u)
                n += 1
                tracker, triager = trackers[u]
                tracker.feed(entry.message, entry.ts, False)
                triager.feed(entry.message, entry.ts, False)
                if rec is not None:
                    rec.journal("gpu-a", "llm", unit, entry)
                    samples += 1
        if second % 5 == 0 and rec is not None:  # the daemon's reading every interval_s
            states = [UnitState(unit=u, active="active" if (second // 60 + i) % 2 else "inactive", sub="running",
                                result="success", main_pid=100 + i) for i, u in enumerate(names)]
            rec.states("gpu-a", "llm", states)
            rec.health("llm", health)
            rec.metrics("llm", scrape)
            rec.gpus(gpus)
            samples += 3 + units
        if rec is not None:
            clock[0] = T0 + second + 1
            rec.tick()
    cpu = time.process_time() - cpu0
    if rec is not None:
        rec.close()
    return {"cpu_s": cpu, "samples": samples, "lines": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600, help="simulated seconds (default 600)")
    parser.add_argument("--rate", type=int, default=100, help="journal lines per second per unit (default 100)")
    parser.add_argument("--units", type=int, default=8)
    args = parser.parse_args()
    base = _run(args.seconds, args.rate, args.units, None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "record" / "gpu-a"
        with_rec = _run(args.seconds, args.rate, args.units, folder)
        size = folder_size(folder)
        verdict = T0 + args.seconds - 120
        incident = Incident(kind="ServeEngineFailed", reason="bench", unit="llm@layout0.service",
                            started_at=verdict, verdict_at=verdict)
        started = time.perf_counter()
        path, bundle_bytes = write_incident_bundle(folder, Path(tmp), host="gpu-a", service="llm", engine="vllm",
                                                   nodes=[{"name": "gpu-a", "address": "gpu-a"}], incident=incident,
                                                   now=T0 + args.seconds)
        bundle_s = time.perf_counter() - started
        bundle_records = len(read_bundle(path).timeline)
    extra = with_rec["cpu_s"] - base["cpu_s"]
    per_hour = 3600 / args.seconds
    figures = {
        "units": args.units, "lines_per_s_per_unit": args.rate, "simulated_s": args.seconds,
        "baseline_cpu_s": round(base["cpu_s"], 3), "recorder_cpu_s": round(with_rec["cpu_s"], 3),
        "cpu_ratio": round(with_rec["cpu_s"] / base["cpu_s"], 3),
        "cpu_us_per_sample": round(extra / with_rec["samples"] * 1e6, 2),
        "cpu_overhead_pct": round(extra / args.seconds * 100, 3),
        "bytes_per_s_per_host": round(size / args.seconds),
        "mib_per_host_hour": round(size * per_hour / (1 << 20), 2),
        "bundle_write_s": round(bundle_s, 3), "bundle_records": bundle_records, "bundle_bytes": bundle_bytes,
    }
    print(f"{args.units} units x {args.rate} lines/s, {args.seconds} simulated s, one host")
    print(f"  baseline (triage + phases per line)  {base['cpu_s']:8.3f} CPU s")
    print(f"  with the record                       {with_rec['cpu_s']:8.3f} CPU s   ratio {figures['cpu_ratio']:.2f}x")
    print(f"  record: {figures['cpu_us_per_sample']} us CPU per sample, {figures['cpu_overhead_pct']}% of one core, "
          f"{figures['bytes_per_s_per_host']} B/s = {figures['mib_per_host_hour']} MiB per host-hour")
    print(f"  a 12-minute bundle: {bundle_records} records, {bundle_bytes} B, written in {bundle_s:.3f} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
