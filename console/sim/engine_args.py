"""Command-line flags of the simulated engine: SGLang's own, plus the simulated host's.

The SGLang flags keep SGLang's names and defaults, so a unit file written for the simulated host reads
like one written for a real one. Flags SGLang has that change nothing here (`--trust-remote-code`,
`--attention-backend`, ...) are accepted and shown in `server_args`, as SGLang would.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from console.domain.layout import Layout

TIME_SCALE_ENV = "SERVE_CONSOLE_SIM_TIME_SCALE"
FAILURES = ("nccl", "port", "kv", "cuda_graph")
DEFAULT_PORT = 30000


@dataclass(frozen=True, slots=True)
class EngineArgs:
    """Everything the simulated engine was asked to do."""

    model_path: str
    """`--model-path` as given (shown in `server_args` and `/get_model_info`)."""
    config_path: Path
    """The model's config.json."""
    served_model_name: str
    layout: Layout
    host: str
    port: int
    mem_fraction_static: float | None
    enable_metrics: bool
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    max_running_requests: int | None
    context_length: int | None
    dist_timeout_s: int | None
    random_seed: int
    gpu_count: int
    gpu_total_mib: int
    gpu_name: str
    time_scale: float
    ledger_dir: Path
    fail: str | None
    base_gpu_id: int = 0
    gpu_id_step: int = 1
    visible_devices: tuple[str, ...] | None = None
    """`CUDA_VISIBLE_DEVICES`, split at commas (None when unset)."""
    passthrough: tuple[tuple[str, object], ...] = ()
    """Accepted SGLang flags without an effect here, for the `server_args` line."""
    ignored: tuple[str, ...] = ()
    """Other `--flags` (SGLang has hundreds); the engine names them in one warning line."""
    engine: str = "sglang"
    """Which engine this run speaks: "sglang" (`console.sim.sglang.server`) or "vllm" (`console.sim.vllm.server`)."""
    gpu_memory_utilization: float = 0.9
    """vLLM's `--gpu-memory-utilization`: the share of each card weights, activations and KV may use."""


# SGLang flags accepted for fidelity that change nothing in the simulation; their values are kept
# (`EngineArgs.passthrough`) for the server_args line.
_NO_EFFECT_SWITCHES = ("--trust-remote-code", "--disable-cuda-graph", "--enable-torch-compile",
                       "--skip-server-warmup", "--enable-ep-moe")
_NO_EFFECT_OPTIONS = ("--tokenizer-path", "--log-level", "--log-level-http", "--attention-backend",
                      "--kv-cache-dtype", "--quantization", "--tool-call-parser", "--reasoning-parser",
                      "--moe-a2a-backend", "--dist-init-addr", "--nnodes", "--node-rank", "--chat-template",
                      "--dtype", "--load-format")


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m console.sim.sglang.server",
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
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--gpu-id-step", type=int, default=1)
    for flag in _NO_EFFECT_SWITCHES:
        p.add_argument(flag, action="store_true")
    for flag in _NO_EFFECT_OPTIONS:
        p.add_argument(flag, default=None)
    p.add_argument("--api-key", default=None)  # accepted, never kept: a secret has no place in server_args
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
    sim.add_argument("--fail", choices=FAILURES, default=None, help="inject a real failure")
    return p


def resolve_config_path(model_path: str) -> Path:
    """The config.json that `--model-path` names (a file, or a directory holding config.json)."""
    path = Path(model_path)
    return path / "config.json" if path.is_dir() else path


def default_served_name(model_path: str) -> str:
    """SGLang serves the model under its path; a fixture file `org--name.json` reads as `org/name`."""
    path = Path(model_path)
    if path.suffix == ".json" and path.name != "config.json":
        return path.stem.replace("--", "/", 1)
    if path.name == "config.json":
        return str(path.parent)
    return model_path


def _visible_devices(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    return tuple(part.strip() for part in raw.split(","))


def cuda_devices(visible: Sequence[str] | None, gpu_count: int, uuids: Sequence[str] = ()) -> list[int]:
    """The nvidia-smi index behind each CUDA device index, as the CUDA runtime maps them.

    Without `CUDA_VISIBLE_DEVICES` CUDA sees every card (identical cards: CUDA's fastest-first order is
    the PCI order). With it, CUDA device i is the i-th entry, an index or a (prefix of a) UUID; the
    list ends at the first entry that names no card, as in the CUDA runtime.
    """
    if visible is None:
        return list(range(gpu_count))
    devices: list[int] = []
    for entry in visible:
        if entry.isdigit() and int(entry) < gpu_count:
            index = int(entry)
        else:
            matches = [i for i, u in enumerate(uuids) if entry and u.startswith(entry)]
            if len(matches) != 1 or matches[0] >= gpu_count:
                break
            index = matches[0]
        if index in devices:
            break
        devices.append(index)
    return devices


#: The slowest simulated pace (hosts.toml's time_scale has the same bound); inf would never finish.
MAX_TIME_SCALE = 1000.0


def checked_time_scale(value: float | str, source: str) -> float:
    """A time scale above 0 and at most MAX_TIME_SCALE; 0, negatives, nan, inf and text are refused.

    Raises:
        ValueError: one line naming `source` (e.g. "SERVE_CONSOLE_SIM_TIME_SCALE=nan").
    """
    try:
        scale = float(value)
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and 0 < scale <= MAX_TIME_SCALE):
        raise ValueError(f"{source}: expected a number above 0 and at most {MAX_TIME_SCALE:g}")
    return scale


def time_scale_from(flag_value: float) -> float:
    """The time scale: the environment overrides the flag; either is checked."""
    raw = os.environ.get(TIME_SCALE_ENV)
    if raw not in (None, ""):
        return checked_time_scale(raw, f"{TIME_SCALE_ENV}={raw}")
    return checked_time_scale(flag_value, f"--time-scale {flag_value}")


def parse_engine_args(argv: Sequence[str] | None = None) -> EngineArgs:
    """Parse the command line (argparse exits 2 with its usage message on bad flags)."""
    parser = _build_parser()
    ns, unknown = parser.parse_known_args(argv)
    stray = [arg for arg in unknown if not arg.startswith("--")]
    if stray and (not unknown or not unknown[0].startswith("--")):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        scale = time_scale_from(ns.time_scale)
    except ValueError as exc:
        parser.error(str(exc))
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
    )
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
        fail=ns.fail,
        base_gpu_id=ns.base_gpu_id,
        gpu_id_step=max(ns.gpu_id_step, 1),
        visible_devices=_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES")),
        passthrough=passthrough,
        ignored=tuple(arg.split("=", 1)[0] for arg in unknown if arg.startswith("--")),
    )
