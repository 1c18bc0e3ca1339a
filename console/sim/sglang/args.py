"""SGLang's command line for the simulated server: SGLang's own flags, plus the simulated host's.

The SGLang flags keep SGLang's names and defaults, so a unit file written for the simulated host reads
like one written for a real one. Flags SGLang has that change nothing here (`--trust-remote-code`,
`--attention-backend`, ...) are accepted and shown in `server_args`, as SGLang would.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from console.domain.layout import Layout
from console.sim.cluster import FAIL_OOM_KILL, FAIL_RENDEZVOUS, split_host_port
from console.sim.engine_args import (
    FAIL_ENV,
    TIME_SCALE_ENV,
    EngineArgs,
    default_served_name,
    failure_from,
    resolve_config_path,
    time_scale_from,
    visible_devices,
)
from console.sim.stall import STALL_FAILURES

FAILURES = ("nccl", "port", "kv", "cuda_graph", FAIL_RENDEZVOUS, FAIL_OOM_KILL, *STALL_FAILURES)
DEFAULT_PORT = 30000


# SGLang flags accepted for fidelity that change nothing in the simulation; their values are kept
# (`EngineArgs.passthrough`) for the server_args line.
_NO_EFFECT_SWITCHES = ("--trust-remote-code", "--disable-cuda-graph", "--enable-torch-compile",
                       "--skip-server-warmup", "--enable-ep-moe")
_NO_EFFECT_OPTIONS = ("--tokenizer-path", "--log-level", "--log-level-http", "--attention-backend",
                      "--kv-cache-dtype", "--quantization", "--tool-call-parser", "--reasoning-parser",
                      "--moe-a2a-backend", "--chat-template",
                      "--dtype", "--load-format")


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m console.sim.sglang",
        description="A simulated SGLang server on a simulated GPU host (only the GPUs are simulated).",
    )
    p.add_argument("--model-path", "--model", required=True,
                   help="the model's config.json, or a directory that holds one")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tp-size", "--tensor-parallel-size", "--tp", type=int, default=1)
    p.add_argument("--ep-size", "--expert-parallel-size", "--ep", type=int, default=1)
    p.add_argument("--pp-size", "--pipeline-parallel-size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", "--dp", type=int, default=1)
    p.add_argument("--enable-dp-attention", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--cuda-graph-max-bs", type=int, default=160)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--dist-timeout", type=int, default=None)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", default=None, help="node 0's rendezvous HOST:PORT")
    # An int default prints as SGLang's own (300); a value given is a float (300.0), as in SGLang.
    p.add_argument("--watchdog-timeout", type=float, default=300)
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--gpu-id-step", type=int, default=1)
    for flag in _NO_EFFECT_SWITCHES:
        p.add_argument(flag, action="store_true")
    for flag in _NO_EFFECT_OPTIONS:
        p.add_argument(flag, default=None)
    p.add_argument("--api-key", default=None)  # accepted, never kept: a secret has no place in server_args
    p.add_argument("--log-requests", action="store_true", help="log each request and answer (request_log.py)")
    p.add_argument("--log-requests-level", type=int, choices=range(4), default=2)
    sim = p.add_argument_group("simulated host")
    sim.add_argument("--gpu-count", type=int, default=8)
    sim.add_argument("--gpu-total-mib", type=int, default=97887,
                     help="per-card memory as nvidia-smi reports it (default 97887)")
    sim.add_argument("--gpu-name", default="NVIDIA RTX PRO 6000 Blackwell Server Edition")
    sim.add_argument("--time-scale", type=float, default=1.0,
                     help=f"multiply every duration by this (env {TIME_SCALE_ENV} overrides)")
    sim.add_argument("--ledger-dir", default=None,
                     help="GPU ledger directory (default $SERVE_CONSOLE_SIM_LEDGER or "
                          "/var/lib/serve-console-sim/ledger)")
    sim.add_argument("--fail", choices=FAILURES, default=None,
                     help=f"inject a real failure (default ${FAIL_ENV})")
    return p


def parse_engine_args(argv: Sequence[str] | None = None) -> EngineArgs:
    """Parse the command line (argparse exits 2 with its usage message on bad flags)."""
    parser = _build_parser()
    ns, unknown = parser.parse_known_args(argv)
    stray = [arg for arg in unknown if not arg.startswith("--")]
    if stray and (not unknown or not unknown[0].startswith("--")):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        scale = time_scale_from(ns.time_scale)
        fail = failure_from(ns.fail, FAILURES)
    except ValueError as exc:
        parser.error(str(exc))
    _check_nodes(parser, ns)
    if ns.ledger_dir:
        ledger_dir = Path(ns.ledger_dir)
    else:
        from console.sim.ledger import ledger_dir_from_env

        ledger_dir = ledger_dir_from_env()
    if ns.mem_fraction_static is not None and not 0 < ns.mem_fraction_static < 1:
        parser.error("--mem-fraction-static must be between 0 and 1")
    layout = Layout(tp=ns.tp_size, ep=ns.ep_size, pp=ns.pp_size, dp=ns.dp_size,
                    dp_attention=ns.enable_dp_attention)
    passthrough = tuple(
        (dest, getattr(ns, dest))
        for dest in (flag[2:].replace("-", "_") for flag in _NO_EFFECT_SWITCHES + _NO_EFFECT_OPTIONS)
    ) + (("log_requests", ns.log_requests), ("log_requests_level", ns.log_requests_level),  # server.py reads these
         ("watchdog_timeout", ns.watchdog_timeout))
    return EngineArgs(
        model_path=ns.model_path,
        config_path=resolve_config_path(ns.model_path),
        served_model_name=ns.served_model_name or default_served_name(ns.model_path),
        layout=layout,
        host=ns.host,
        port=ns.port,
        mem_fraction_static=ns.mem_fraction_static,
        enable_metrics=ns.enable_metrics,
        chunked_prefill_size=ns.chunked_prefill_size,
        cuda_graph_max_bs=ns.cuda_graph_max_bs,
        max_running_requests=ns.max_running_requests,
        context_length=ns.context_length,
        dist_timeout_s=ns.dist_timeout,
        random_seed=ns.random_seed if ns.random_seed is not None else 1234,
        gpu_count=ns.gpu_count,
        gpu_total_mib=ns.gpu_total_mib,
        gpu_name=ns.gpu_name,
        time_scale=scale,
        ledger_dir=ledger_dir,
        fail=fail,
        base_gpu_id=ns.base_gpu_id,
        gpu_id_step=max(ns.gpu_id_step, 1),
        visible_devices=visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES")),
        passthrough=passthrough,
        ignored=tuple(arg.split("=", 1)[0] for arg in unknown if arg.startswith("--")),
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        dist_init_addr=ns.dist_init_addr,
        watchdog_timeout_s=float(ns.watchdog_timeout),
    )


def _check_nodes(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """The multi-node flags make sense together (SGLang would hang or fail later on what this refuses)."""
    if ns.nnodes < 1 or not 0 <= ns.node_rank < ns.nnodes:
        parser.error(f"--node-rank {ns.node_rank} is not a node of --nnodes {ns.nnodes}")
    if ns.nnodes > 1 and not ns.dist_init_addr:
        parser.error("--dist-init-addr HOST:PORT (node 0's address) is needed with --nnodes > 1")
    if ns.dist_init_addr:
        try:
            split_host_port(ns.dist_init_addr)
        except ValueError as exc:
            parser.error(f"--dist-init-addr: {exc}")
