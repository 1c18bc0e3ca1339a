"""The fleet's PromQL: every figure of every host in three instant queries, grouped by the host label.

Each figure is one aggregation `by (LABEL)`, tagged with a `sc_field` label through `label_replace`, and
the figures of a group are joined with `or` (their label sets never collide, so every series comes
back). The three groups (GPUs, engines and `up`, last seen) go out at once. The
sample times come from `timestamp()` of the raw series (an instant query's own timestamps are its
evaluation time), and a subquery over `seen_window_s` finds when a host that stopped reporting was
last seen, so its row shows an age instead of zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.config import FleetConfig

FIELD_LABEL = "sc_field"
DCGM_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FREE = "DCGM_FI_DEV_FB_FREE"
SEEN_STEP_S = 120
BUSY_MIB = 1024  # a GPU holding more than this holds a model (the SSH fleet's rule too)
#: The engines' names for each figure: SGLang's, vLLM's, and vLLM's older name where it has one.
RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
WAITING = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
KV_USAGE = ("sglang:token_usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
GENERATION = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")


#: Labels that tell the ranks of one engine replica apart; the ranks report the same figures, so the
#: highest is kept per replica (vLLM's `engine`, SGLang's `dp_rank` replicas are then summed).
RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank", "ep_rank", "attn_tp_rank")


class _Selectors:
    """Series selectors, each with the `[fleet] match` matchers when there are some."""

    def __init__(self, match: str | None) -> None:
        match = (match or "").strip().rstrip(",").strip()
        self.extra = f",{match}" if match else ""

    def metric(self, name: str) -> str:
        return f"{name}{{{self.extra.lstrip(',')}}}" if self.extra else name

    def names(self, names: Iterable[str]) -> str:
        return '{__name__=~"' + "|".join(names) + '"' + self.extra + "}"


def _per_replica(expr: str) -> str:
    return f"max without ({', '.join(RANK_LABELS)}) ({expr})"


def field_exprs(cfg: FleetConfig) -> dict[str, dict[str, str]]:
    """Query group -> field name -> PromQL aggregated by the host label.

    The groups are sent as concurrent HTTP calls: Prometheus evaluates one query on one core.
    """
    by = f"by ({cfg.host_label})"
    sel = _Selectors(cfg.match)
    used, free, up = sel.metric(DCGM_USED), sel.metric(DCGM_FREE), sel.metric("up")
    running, waiting = sel.names(RUNNING), sel.names(WAITING)
    # A subquery step below the server's look-back (5 min by default) finds the exact last sample.
    window, step = f"{cfg.seen_window_s}s", f"{min(SEEN_STEP_S, cfg.seen_window_s)}s"
    return {
        "gpus": {
            "gpus_used_mib": f"sum {by} ({used})",
            "gpus_total_mib": f"sum {by} ({used} + {free})",
            "gpu_count": f"count {by} ({used})",
            "gpus_busy": f"sum {by} ({used} > bool {BUSY_MIB})",
            "gpus_ts": f"max {by} (timestamp({used}))",
        },
        "engines": {
            "up": f"min {by} ({up})",
            "targets": f"count {by} ({up})",
            "targets_up": f"sum {by} ({up})",
            "running_requests": f"sum {by} ({_per_replica(running)})",
            "waiting_requests": f"sum {by} ({_per_replica(waiting)})",
            "kv_cache_usage": f"max {by} ({sel.names(KV_USAGE)})",
            "generation_tokens_per_s":
                f"sum {by} ({_per_replica(f'rate({sel.names(GENERATION)}[{cfg.rate_window_s}s])')})",
            "engine_ts": f"max {by} (timestamp({running}))",
        },
        "seen": {
            "gpus_seen": f"max {by} (max_over_time(timestamp({used})[{window}:{step}]))",
            "engine_seen": f"max {by} (max_over_time(timestamp({running})[{window}:{step}]))",
        },
    }


def fleet_queries(cfg: FleetConfig) -> list[str]:
    """The few instant queries (one per group) that read every field for every host."""
    return [
        " or ".join(f'label_replace({expr}, "{FIELD_LABEL}", "{name}", "", "")' for name, expr in group.items())
        for group in field_exprs(cfg).values()
    ]


def _min(a: float, b: float) -> float:
    return min(a, b)


def _max(a: float, b: float) -> float:
    return max(a, b)


def _sum(a: float, b: float) -> float:
    return a + b


#: How two label values that map to one host (gpu-07:9400 and gpu-07:8000) combine, per field.
COMBINE: dict[str, Callable[[float, float], float]] = {
    "up": _min,
    "kv_cache_usage": _max,
    "gpus_ts": _max,
    "gpus_seen": _max,
    "engine_ts": _max,
    "engine_seen": _max,
}


@dataclass
class HostFigures:
    """The fields that came back for one host, merged over its label values."""

    label_values: set[str]
    fields: dict[str, float]

    def add(self, label_value: str, field: str, value: float) -> None:
        self.label_values.add(label_value)
        if field in self.fields:
            value = COMBINE.get(field, _sum)(self.fields[field], value)
        self.fields[field] = value
