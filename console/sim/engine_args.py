"""What a simulated engine was asked to do (`EngineArgs`), and the flags both engines read the same way.

Each engine parses its own command line (`sglang/args.py`, `vllm/args.py`) into one `EngineArgs`; the
model path, `CUDA_VISIBLE_DEVICES` and the time scale are read the same way by both.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from console.domain.layout import Layout

TIME_SCALE_ENV = "SERVE_CONSOLE_SIM_TIME_SCALE"
#: The failure to inject when `--fail` is not given (a node's unit can carry it in its environment).
FAIL_ENV = "SERVE_CONSOLE_SIM_FAIL"


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
    """Which engine this run speaks: "sglang" (`console.sim.sglang`) or "vllm" (`console.sim.vllm`)."""
    gpu_memory_utilization: float = 0.9
    """vLLM's `--gpu-memory-utilization`: the share of each card weights, activations and KV may use."""
    kv_cache_memory_bytes: int | None = None
    """vLLM's `--kv-cache-memory-bytes`: the KV cache per worker, in place of what the utilization leaves."""
    nnodes: int = 1
    """Hosts the service spans (SGLang's and vLLM's `--nnodes`); each runs world/nnodes ranks."""
    node_rank: int = 0
    """This host's place (`--node-rank`); node 0 is the head, which serves the API."""
    dist_init_addr: str | None = None
    """Node 0's rendezvous `HOST:PORT` (SGLang's `--dist-init-addr`; vLLM's `--master-addr:--master-port`)."""
    headless: bool = False
    """vLLM's `--headless`: this node runs only workers, no API server and no engine core."""
    watchdog_timeout_s: float = 300.0
    """How long a running batch may make no progress before the engine gives up (SGLang's
    `--watchdog-timeout`; vLLM's VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS), in story seconds."""


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


def visible_devices(raw: str | None) -> tuple[str, ...] | None:
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


def failure_from(flag_value: str | None, choices: Sequence[str]) -> str | None:
    """The failure to inject: `--fail`, else $SERVE_CONSOLE_SIM_FAIL; either must be one of `choices`.

    Raises:
        ValueError: one line naming the unknown failure and the known ones.
    """
    value = flag_value or os.environ.get(FAIL_ENV) or None
    if value is not None and value not in choices:
        raise ValueError(f"{FAIL_ENV}={value}: expected one of {', '.join(choices)}")
    return value
