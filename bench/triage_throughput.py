"""How many log lines per second can triage classify? Against a naive run-every-regex loop.

The journal pane classifies every line of a noisy unit, so the ordinary line must be cheap. The mix
is a serving engine's journal: mostly ordinary lines (decode batches, uvicorn access logs, vLLM
throughput lines) with the fixture logs' start-ups and failures mixed in, about 2% failure lines.

- `classify_line`: substring prefilter, regexes only on a hit (what the console runs);
- baseline: the same signatures as one regex each (needles as an alternation) plus the figure
  regexes, every one searched on every line: the obvious way to write it.

Also measured: `Triager.feed` (tracebacks, de-duplication) and `PhaseTracker.feed`, and the cost of
one ordinary line. Rates are in CPU seconds of this process. The last line of output is one JSON
object with the figures.

    .venv/bin/python bench/triage_throughput.py [--lines 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from console.domain.phases import PhaseTracker
from console.domain.triage import oom, signature_table, signatures, signatures_env, signatures_host
from console.domain.triage.triager import Triager, classify_line
from console.domain.values import Engine

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
SYSLOG = "May 26 00:{m:02d}:{s:02d} gpu-node-1 python3[2101]: "


def ordinary_lines(rng: random.Random, n: int) -> list[str]:
    """Lines a busy engine writes while serving, with journal prefixes."""
    out = []
    for i in range(n):
        prefix = SYSLOG.format(m=i // 60 % 60, s=i % 60)
        kind = rng.randrange(5)
        if kind == 0:
            out.append(
                f"{prefix}[2026-05-26 00:10:{i % 60:02d} TP{rng.randrange(8)}] Decode batch. #running-req: "
                f"{rng.randrange(64)}, #token: {rng.randrange(99999)}, token usage: 0.{rng.randrange(99):02d}, "
                f"cuda graph: True, gen throughput (token/s): {rng.uniform(10, 900):.2f}, #queue-req: 0,"
            )
        elif kind == 1:
            out.append(
                f'{prefix}[2026-05-26 00:10:{i % 60:02d}] INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - '
                f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
        elif kind == 2:
            out.append(
                f"(APIServer pid=2961) INFO 05-26 00:10:{i % 60:02d} [loggers.py:123] Engine 000: Avg prompt "
                f"throughput: {rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
                f"{rng.uniform(0, 900):.1f} tokens/s, Running: {rng.randrange(64)} reqs, Waiting: 0 reqs, "
                f"GPU KV cache usage: {rng.uniform(0, 90):.1f}%, Prefix cache hit rate: 12.3%"
            )
        elif kind == 3:
            out.append(
                f"{prefix}[2026-05-26 00:10:{i % 60:02d} TP0] Prefill batch. #new-seq: 1, #new-token: "
                f"{rng.randrange(4096)}, #cached-token: {rng.randrange(4096)}, token usage: 0.01, #running-req: 3,"
            )
        else:
            out.append(f"{prefix}gpu-node-1:2140:2140 [3] NCCL INFO Channel {rng.randrange(32):02d}/0 : 3[3] -> 4[4] via P2P/CUMEM")
    return out


def realistic_mix(n: int, seed: int = 7) -> list[str]:
    """About 2% of lines from the failure fixtures, the rest ordinary serving lines."""
    rng = random.Random(seed)
    fixture_lines = [line for path in sorted(FIXTURES.glob("*.log")) for line in path.read_text().splitlines()]
    failing = [line for line in fixture_lines if classify_line(line) is not None]
    lines = ordinary_lines(rng, n)
    for i in range(0, n, 50):
        lines[i] = rng.choice(failing)
    for i in range(25, n, 200):
        lines[i] = rng.choice(fixture_lines)
    return lines


def naive_classifier() -> Callable[[str], object]:
    """Every signature as a regex, plus every figure regex, all searched on every line."""
    patterns = [
        re.compile("|".join(re.escape(n) for n in (*sig.needles, *sig.exception_needles)))
        for sig in signature_table.SIGNATURES
    ]
    patterns.append(re.compile(re.escape(signature_table.HARMLESS[0])))
    figure_patterns = [
        value for module in (signatures, signatures_env, signatures_host, oom) for name, value in vars(module).items()
        if name.startswith("_") and isinstance(value, re.Pattern)
    ]
    everything = patterns + figure_patterns

    def classify(line: str) -> object:
        hits = [p.search(line) for p in everything]
        return next((h for h in hits[: len(patterns)] if h), None)

    return classify


def rate(fn: Callable[[str], object], lines: list[str], repeat: int) -> float:
    """Best lines/s over `repeat` passes, in this process's CPU time: other work on a shared
    machine then skews the figure less than wall time would."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for line in lines:
            fn(line)
        best = min(best, time.process_time() - started)
    return len(lines) / max(best, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    lines = realistic_mix(args.lines)
    ordinary = ordinary_lines(random.Random(3), min(args.lines, 50_000))
    naive = naive_classifier()
    classify_rate = rate(classify_line, lines, args.repeat)
    naive_rate = rate(naive, lines, args.repeat)
    ordinary_ns = 1e9 / rate(classify_line, ordinary, args.repeat)
    triager = Triager()
    feed_rate = rate(triager.feed, lines, args.repeat)
    tracker = PhaseTracker(Engine.SGLANG)
    phase_rate = rate(lambda line: tracker.feed(line, 0.0), lines, args.repeat)

    print(f"lines in the mix:            {len(lines)} ({sum(classify_line(x) is not None for x in lines)} findings)")
    print(f"classify_line:               {classify_rate:12,.0f} lines/s")
    print(f"naive (every regex):         {naive_rate:12,.0f} lines/s")
    print(f"ratio (classify / naive):    {classify_rate / naive_rate:12.1f}x")
    print(f"ordinary line:               {ordinary_ns:12,.0f} ns")
    print(f"Triager.feed:                {feed_rate:12,.0f} lines/s")
    print(f"PhaseTracker.feed (sglang):  {phase_rate:12,.0f} lines/s")
    print(
        json.dumps(
            {
                "bench": "triage_throughput",
                "lines": len(lines),
                "classify_lines_per_s": round(classify_rate),
                "naive_lines_per_s": round(naive_rate),
                "ratio_vs_naive": round(classify_rate / naive_rate, 2),
                "ordinary_line_ns": round(ordinary_ns),
                "triager_feed_lines_per_s": round(feed_rate),
                "phase_tracker_lines_per_s": round(phase_rate),
            }
        )
    )


if __name__ == "__main__":
    main()
