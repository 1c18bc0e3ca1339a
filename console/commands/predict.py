"""`serve-console predict`: each layout's TTFT, TPOT and tok/s before anything restarts.

With `--host`, the host's config gives the model, engine, GPUs and layouts, and the results store its
calibration (every stored probe level of the service). Exit codes: 0 predictions printed (layouts that do not fit are reported, never ranked), 2 usage errors
(missing or broken model config, a GPU the hardware table does not know, bad numbers or layouts).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Add the `predict` subcommand."""
    parser = subparsers.add_parser(
        "predict",
        help="predict TTFT, TPOT and tok/s of a model in each layout",
        description="Predict the speed of each layout from physics and the GPU/link table (docs/predict.md).",
    )
    parser.add_argument("--model-config", metavar="PATH", help="the model's config.json (or its dir)")
    parser.add_argument("--gpu", metavar="NAME", help='"NVIDIA H100 80GB HBM3" or a short name (H100-SXM)')
    parser.add_argument("--gpus", type=int, metavar="N", help="GPUs per node")
    parser.add_argument("--nodes", type=int, default=1, metavar="M", help="nodes (1)")
    parser.add_argument(
        "--interconnect",
        choices=("pcie", "pcie-p2p", "nvlink"),
        help="the link between a node's GPUs (default: nvlink for SXM/OAM parts, pcie otherwise)",
    )
    parser.add_argument(
        "--engine", choices=("sglang", "vllm"), help="serving engine (sglang; with --host: the service's)"
    )
    parser.add_argument(
        "--layout",
        action="append",
        metavar="LAYOUT",
        help='"TP8", "TP8 EP8", "--pp-size 8"; repeat (with --host: default every layout of the service)',
    )
    parser.add_argument(
        "--host",
        metavar="H",
        help="take the model, engine, GPUs and layouts from this host of hosts.toml, and calibrate from "
        "its stored probe results",
    )
    parser.add_argument(
        "--service", metavar="S", help="with --host: the service (default: the host's only one)"
    )
    parser.add_argument("--input-len", type=int, default=1000, metavar="I", help="prompt tokens (1000)")
    parser.add_argument("--output-len", type=int, default=1000, metavar="O", help="output tokens (1000)")
    parser.add_argument("--concurrency", default="1", metavar="C[,C2,...]", help="requests in flight (1)")
    parser.add_argument(
        "--precision",
        choices=("bf16", "fp8", "fp4"),
        help="the served weights' precision when not the config's",
    )
    parser.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="LAYOUT,CONCURRENCY,METRIC=VALUE",
        help="a measured figure to calibrate from (per_request_tok_s, output_tok_s, tpot_ms, ttft_ms); repeat",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per (layout, concurrency)")
    parser.set_defaults(func=run)


def _positive(name: str, value: int) -> int:
    from console.errors import UsageError

    if value < 1:
        raise UsageError(f"{name} must be at least 1, got {value}")
    return value


def _concurrencies(text: str) -> list[int]:
    from console.errors import UsageError

    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--concurrency {text!r}: not a list of integers") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--concurrency {text!r}: each value must be at least 1")
    return values


def parse_measured(text: str) -> tuple[str, int, str, float]:
    """`TP8,1,per_request_tok_s=26.3` -> (layout text, concurrency, metric, value).

    Raises:
        UsageError: not in that form (the message quotes it).
    """
    from console.domain.perf import METRICS
    from console.errors import UsageError

    parts = text.rsplit(",", 2)
    if len(parts) != 3 or "=" not in parts[2]:
        raise UsageError(f"--measured {text!r}: expected LAYOUT,CONCURRENCY,METRIC=VALUE")
    layout, conc, pair = parts
    metric, _, value = pair.partition("=")
    if metric not in METRICS:
        raise UsageError(f"--measured {text!r}: METRIC must be one of {', '.join(METRICS)}")
    try:
        concurrency, number = int(conc), float(value)
    except ValueError:
        raise UsageError(f"--measured {text!r}: CONCURRENCY must be an integer and VALUE a number") from None
    if concurrency < 1 or not number > 0:
        raise UsageError(f"--measured {text!r}: CONCURRENCY and VALUE must be positive")
    return layout.strip(), concurrency, metric, number


def run(args: argparse.Namespace) -> int:
    """Predict each (layout, concurrency); print a table or JSON lines."""
    from console.commands.predict_run import predict_rows

    rows = predict_rows(args)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        _print_table(rows)
    sys.stdout.flush()
    return 0


def _print_table(rows: list[dict[str, Any]]) -> None:
    header = ("layout", "c", "TTFT ms", "TPOT ms", "tok/s/req", "tok/s", "range", "verdict")
    lines = []
    for row in rows:
        if row["output_tok_s"] is None:
            lines.append((row["layout"], str(row["concurrency"]), "-", "-", "-", "-", "-", row["verdict"]))
            continue
        rng = row["range"]
        lines.append(
            (
                row["layout"],
                str(row["concurrency"]),
                f"{row['ttft_ms']:.0f}",
                f"{row['tpot_ms']:.2f}",
                f"{row['per_request_tok_s']:.1f}",
                f"{row['output_tok_s']:.0f}",
                f"{rng['low']:.0f}-{rng['high']:.0f}",
                row["verdict"] + (" (calibrated)" if row["calibrated"] else ""),
            )
        )
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    for line in [header, *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
