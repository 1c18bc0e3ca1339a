"""The probe's options, shared by `probe` and `explore`: parsing and checking them once."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from console.errors import UsageError
from console.ops.explore import CHAT, COMPLETIONS, ProbeOptions, parse_levels


def add_probe_options(parser: argparse.ArgumentParser, *, default_concurrency: str = "1") -> None:
    group = parser.add_argument_group("load (as vllm bench serve / sglang.bench_serving)")
    group.add_argument("--concurrency", default=default_concurrency, metavar="N[,N...]",
                       help=f"closed loop: one run per level (default {default_concurrency})")
    group.add_argument("--request-rate", metavar="R",
                       help="open loop: Poisson arrivals at R requests/s (`inf`: all at once)")
    group.add_argument("--max-concurrency", type=int, metavar="N", help="with --request-rate: at most N in flight")
    group.add_argument("--num-prompts", type=int, default=None, metavar="N",
                       help="requests per level (default: 4 x the level, at least 8)")
    group.add_argument("--input-len", type=int, default=256, metavar="T", help="prompt tokens (default 256)")
    group.add_argument("--output-len", type=int, default=128, metavar="T",
                       help="output tokens, held with ignore_eos/min_tokens (default 128)")
    group.add_argument("--warmup", type=int, default=1, metavar="N", help="warm-up requests, dropped (default 1)")
    group.add_argument("--seed", type=int, default=0, help="seed of the random prompts and arrivals")
    group.add_argument("--dataset", type=Path, metavar="FILE", help="ShareGPT JSON: first human turns as prompts")
    group.add_argument("--max-duration", type=float, metavar="S", help="upper bound per level, in seconds")
    group.add_argument("--endpoint", choices=(COMPLETIONS, CHAT), default=COMPLETIONS,
                       help="/v1/completions (default) or /v1/chat/completions")


def options_from_args(args: argparse.Namespace) -> ProbeOptions:
    """The ProbeOptions the arguments name.

    Raises:
        UsageError: a value out of range (one line naming the option).
    """
    levels = parse_levels(args.concurrency)
    rate = None
    if args.request_rate is not None:
        try:
            rate = math.inf if args.request_rate.strip().lower() == "inf" else float(args.request_rate)
        except ValueError:
            raise UsageError(f"--request-rate {args.request_rate!r}: a number of requests/s, or inf") from None
        if not rate > 0:
            raise UsageError("--request-rate must be positive")
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise UsageError("--max-concurrency must be at least 1")
    for name in ("input_len", "output_len"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if args.max_duration is not None and not args.max_duration > 0:
        raise UsageError("--max-duration must be positive")
    num = args.num_prompts
    if num is not None and num < 1:
        raise UsageError("--num-prompts must be at least 1")
    if args.dataset is not None and not args.dataset.is_file():
        raise UsageError(f"{args.dataset}: no such dataset file")
    return ProbeOptions(
        concurrency=levels, request_rate=rate, max_concurrency=args.max_concurrency, num_prompts=num,
        input_len=args.input_len, output_len=args.output_len, warmup=args.warmup, seed=args.seed,
        dataset=args.dataset, max_duration_s=args.max_duration, endpoint=args.endpoint,
    )  # fmt: skip
