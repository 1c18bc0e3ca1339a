"""`serve-console fit`: will this model fit on these GPUs in this layout?

Exit codes: 0 every layout fits (or is tight), 1 some layout is `oom` or `invalid`, 2 usage errors
(missing or broken model config, unreadable layout, bad numbers).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Add the `fit` subcommand."""
    parser = subparsers.add_parser(
        "fit",
        help="predict per-GPU memory of a model in a layout",
        description="Predict weights per GPU, start-up overhead and KV headroom for a model and layout.",
    )
    parser.add_argument(
        "--model-config", required=True, metavar="PATH", help="the model's config.json (or its dir)"
    )
    parser.add_argument(
        "--layout",
        required=True,
        action="append",
        metavar="LAYOUT",
        help='e.g. "TP8", "TP4 EP2", "--tp-size 4 --ep-size 2"; repeat to compare layouts',
    )
    parser.add_argument(
        "--gpu-mem-gib",
        required=True,
        type=float,
        metavar="GIB",
        help="GPU capacity as PyTorch reports it (94.97)",
    )
    parser.add_argument(
        "--engine", choices=("sglang", "vllm"), default="sglang", help="serving engine (sglang)"
    )
    parser.add_argument("--gpus", type=int, metavar="N", help="GPUs on the host; refuse layouts needing more")
    parser.add_argument(
        "--mem-fraction",
        type=float,
        metavar="F",
        help="SGLang --mem-fraction-static or vLLM --gpu-memory-utilization (default: the engine's)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per layout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Predict the fit of each layout; print a table or JSON."""
    from console.domain.fit import load_model_spec, predict_fit
    from console.domain.layout import LayoutError, parse_layout
    from console.errors import UsageError

    if not args.gpu_mem_gib > 0:
        raise UsageError(f"--gpu-mem-gib must be positive, got {args.gpu_mem_gib}")
    if args.gpus is not None and args.gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {args.gpus}")
    if args.mem_fraction is not None and not 0 < args.mem_fraction <= 1:
        raise UsageError(f"--mem-fraction must be in (0, 1], got {args.mem_fraction}")
    layouts = []
    for text in args.layout:
        try:
            layouts.append(parse_layout(text))
        except LayoutError as exc:
            raise UsageError(f"--layout {text!r}: {exc}") from None
    spec = load_model_spec(args.model_config)
    results = [
        predict_fit(
            spec,
            layout,
            args.engine,
            gpu_mem_gib=args.gpu_mem_gib,
            gpu_count=args.gpus,
            mem_fraction=args.mem_fraction,
        )
        for layout in layouts
    ]
    if args.json:
        for result in results:
            print(json.dumps(result.to_json()))
    else:
        _print_table(spec, results, args.gpu_mem_gib)
    sys.stdout.flush()
    return 0 if all(r.starts for r in results) else 1


def _print_table(spec: Any, results: list[Any], gpu_mem_gib: float) -> None:
    print(
        f"model: {spec.architecture} ({spec.quant.label}, {spec.num_layers} layers"
        + (f", {spec.num_experts} experts" if spec.num_experts else "")
        + f"); GPU: {gpu_mem_gib:.2f} GiB"
    )
    header = ("layout", "engine", "GPUs", "weights/GPU", "overhead", "KV headroom", "verdict")
    rows = [
        (
            r.layout,
            r.engine,
            str(r.gpus_used),
            "-" if r.verdict == "invalid" else f"{r.weights_gib_per_gpu:.2f} GiB",
            "-" if r.verdict == "invalid" else f"{r.overhead_gib:.2f} GiB",
            "-" if r.verdict == "invalid" else f"{r.headroom_gib:.2f} GiB",
            r.verdict,
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {2, 3, 4, 5}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(header).rstrip())
    for row, result in zip(rows, results, strict=True):
        print(line(row).rstrip())
        print(f"  {result.reason}")
