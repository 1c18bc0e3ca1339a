"""Command line of the simulated vLLM server: `python -m console.sim.vllm serve MODEL [flags]`.

vLLM's own spellings are kept (`-tp`, `--tensor-parallel-size`, `-pp`, `-dp`, `--enable-expert-parallel`,
`--gpu-memory-utilization`, `--max-model-len`, port 8000), so a unit written for the simulated host reads
like one written for `vllm serve`. The simulated host's flags (`--gpu-count`, `--ledger-dir`, ...) are the
SGLang simulation's. The result is the same `EngineArgs` the SGLang simulation uses, with engine "vllm".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from console.domain.layout import Layout
from console.sim.cluster import FAIL_OOM_KILL, FAIL_RENDEZVOUS
from console.sim.engine_args import (
    FAIL_ENV,
    EngineArgs,
    default_served_name,
    failure_from,
    resolve_config_path,
    time_scale_from,
    visible_devices,
)
from console.sim.stall import STALL_FAILURES

VLLM_DEFAULT_PORT = 8000
#: `no_token`: the engine starts and its HTTP answers (`/health` 200), but its scheduler never runs a step.
FAIL_NO_TOKEN = "no_token"
VLLM_FAILURES = ("port", "kv", "engine_dead", FAIL_NO_TOKEN, FAIL_RENDEZVOUS, FAIL_OOM_KILL, *STALL_FAILURES)
#: vLLM's timeout for one execute_model or sample_tokens call on the workers (envs.py, default 300 s).
EXECUTE_MODEL_TIMEOUT_ENV = "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"
VLLM_VERSION = "0.32.0"

# vLLM flags accepted for fidelity that change nothing in the simulation.
_NO_EFFECT_SWITCHES = (
    "--trust-remote-code",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--disable-log-requests",
    "--enable-auto-tool-choice",
    "--disable-log-stats",
)
_NO_EFFECT_OPTIONS = (
    "--tokenizer",
    "--dtype",
    "--kv-cache-dtype",
    "--quantization",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--tool-call-parser",
    "--reasoning-parser",
    "--chat-template",
    "--download-dir",
    "--load-format",
    "--swap-space",
    "--seed",
    "--uvicorn-log-level",
    "--distributed-executor-backend",
    "--block-size",
)


def human_readable_int(text: str) -> int:
    """vLLM's sizes: `64M` is 64 MiB (an upper-case suffix is binary), `64m` 64 million (lower-case decimal)."""
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        value = int(float(number) * unit)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m console.sim.vllm serve",
        description="A simulated vLLM OpenAI server on a simulated GPU host (only the GPUs are simulated).",
    )
    p.add_argument(
        "model_tag",
        nargs="?",
        default=None,
        help="the model's config.json, or a directory that holds one (as `vllm serve MODEL`)",
    )
    p.add_argument("--model", default=None, help="the same as the positional MODEL")
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    p.add_argument("--enable-expert-parallel", action="store_true")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--kv-cache-memory-bytes", type=human_readable_int, default=None)
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=VLLM_DEFAULT_PORT)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29501)
    p.add_argument("--headless", action="store_true", help="run only workers: no API server, no engine core")
    p.add_argument("--distributed-timeout-seconds", type=int, default=None)
    for flag in _NO_EFFECT_SWITCHES:
        p.add_argument(flag, action="store_true")
    for flag in _NO_EFFECT_OPTIONS:
        p.add_argument(flag, default=None)
    p.add_argument("--api-key", default=None)  # accepted, never kept
    sim = p.add_argument_group("simulated host")
    sim.add_argument("--gpu-count", type=int, default=8)
    sim.add_argument(
        "--gpu-total-mib",
        type=int,
        default=81559,
        help="per-card memory as nvidia-smi reports it (default 81559, an H100 80 GB)",
    )
    sim.add_argument("--gpu-name", default="NVIDIA H100 80GB HBM3")
    sim.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every duration by this (env SERVE_CONSOLE_SIM_TIME_SCALE overrides)",
    )
    sim.add_argument(
        "--ledger-dir",
        default=None,
        help="GPU ledger directory (default $SERVE_CONSOLE_SIM_LEDGER or /var/lib/serve-console-sim/ledger)",
    )
    sim.add_argument("--fail", choices=VLLM_FAILURES, default=None,
                     help=f"inject a real failure (default ${FAIL_ENV})")
    return p


#: vLLM's flags for data-parallel engines on several nodes, which the simulation refuses by name.
_DP_ACROSS_NODES = ("--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
                    "--data-parallel-start-rank", "-dpl", "-dpa", "-dpp", "-dpr")

_NOT_SHOWN = frozenset(
    {"api_key", "gpu_count", "gpu_total_mib", "gpu_name", "time_scale", "ledger_dir", "fail"}
)


def non_default_args(ns: argparse.Namespace) -> dict[str, object]:
    """What vLLM's `non-default args:` line lists: every flag given with a value other than its default."""
    defaults = vars(_build_parser().parse_args(["m"]))
    return {
        dest: value
        for dest, value in vars(ns).items()
        if dest not in _NOT_SHOWN and value != defaults.get(dest)
    }


def parse_vllm_args(argv: Sequence[str] | None = None) -> tuple[EngineArgs, dict[str, object]]:
    """Parse `serve MODEL [flags]`; argparse exits 2 with its usage message on bad flags.

    Returns:
        The engine arguments, and vLLM's non-default args (for its second log line).
    """
    items = list(argv) if argv is not None else sys.argv[1:]
    if items and items[0] == "serve":
        items = items[1:]
    parser = _build_parser()
    ns, unknown = parser.parse_known_args(items)
    model = ns.model or ns.model_tag
    if not model:
        parser.error("the model is required: serve MODEL")
    ns.model, ns.model_tag = model, model
    if unknown and not unknown[0].startswith("-"):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        scale = time_scale_from(ns.time_scale)
        fail = failure_from(ns.fail, VLLM_FAILURES)
        watchdog_s = float(os.environ.get(EXECUTE_MODEL_TIMEOUT_ENV) or 300)
    except ValueError as exc:
        parser.error(str(exc))
    if ns.nnodes < 1 or not 0 <= ns.node_rank < ns.nnodes:
        parser.error(f"--node-rank {ns.node_rank} is not a node of --nnodes {ns.nnodes}")
    dp_across = [flag for flag in unknown if flag.split("=")[0] in _DP_ACROSS_NODES]
    if dp_across or (ns.headless and ns.node_rank == 0):
        parser.error("data parallelism across nodes (--headless on node 0, " + ", ".join(_DP_ACROSS_NODES)
                     + ") is not simulated; span hosts with --nnodes, --node-rank and --master-addr")
    if not 0 < ns.gpu_memory_utilization <= 1:
        parser.error("--gpu-memory-utilization must be in (0, 1]")
    if ns.ledger_dir:
        ledger_dir = Path(ns.ledger_dir)
    else:
        from console.sim.ledger import ledger_dir_from_env

        ledger_dir = ledger_dir_from_env()
    tp, dp = ns.tensor_parallel_size, ns.data_parallel_size
    layout = Layout(
        tp=tp, pp=ns.pipeline_parallel_size, dp=dp, ep=tp * dp if ns.enable_expert_parallel else 1
    )
    passthrough = tuple(
        (dest, getattr(ns, dest))
        for dest in (flag[2:].replace("-", "_") for flag in _NO_EFFECT_SWITCHES + _NO_EFFECT_OPTIONS)
    )
    args = EngineArgs(
        model_path=model,
        config_path=resolve_config_path(model),
        served_model_name=ns.served_model_name[0] if ns.served_model_name else default_served_name(model),
        layout=layout,
        host=ns.host or "0.0.0.0",
        port=ns.port,
        mem_fraction_static=None,
        enable_metrics=True,  # vLLM always serves /metrics
        chunked_prefill_size=8192,
        cuda_graph_max_bs=512,
        max_running_requests=None,
        context_length=ns.max_model_len,
        dist_timeout_s=ns.distributed_timeout_seconds,
        random_seed=0,
        gpu_count=ns.gpu_count,
        gpu_total_mib=ns.gpu_total_mib,
        gpu_name=ns.gpu_name,
        time_scale=scale,
        ledger_dir=ledger_dir,
        fail=fail,
        visible_devices=visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES")),
        passthrough=passthrough,
        ignored=tuple(arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")),
        engine="vllm",
        gpu_memory_utilization=ns.gpu_memory_utilization,
        kv_cache_memory_bytes=ns.kv_cache_memory_bytes,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        dist_init_addr=f"{ns.master_addr}:{ns.master_port}",
        headless=ns.headless,
        watchdog_timeout_s=watchdog_s,
    )
    return args, non_default_args(ns)
