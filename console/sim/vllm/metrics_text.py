"""The simulated vLLM's /metrics body: every family a real vLLM 0.32 serves, in prometheus_client's layout.

Counters are `NAME_total` followed by a `NAME_created` gauge family, histograms end in `_count`, `_sum`
and their own `_created` family, and every sample carries `engine="0"` and `model_name`, as the real
server writes them (tests/fixtures/vllm-real/metrics-*.txt). Families the simulation does not measure
(multi-modal caches, KV transfer, preemptions, ...) are served at zero.
"""

from __future__ import annotations

from collections.abc import Mapping

from console.sim.metrics import Histogram, Metrics
from console.sim.vllm.metric_families import FAMILIES, Family

_BY_NAME = {family.name: family for family in FAMILIES}


def vllm_metrics() -> Metrics:
    """Metrics whose histograms have the real vLLM's bounds."""
    metrics = Metrics.with_buckets(
        ttft=_BY_NAME["time_to_first_token_seconds"].buckets,
        tpot=_BY_NAME["inter_token_latency_seconds"].buckets,
        e2e=_BY_NAME["e2e_request_latency_seconds"].buckets,
        token_counts=_BY_NAME["request_prompt_tokens"].buckets,
    )
    metrics.steps = Histogram(_BY_NAME["iteration_tokens_total"].buckets)
    return metrics


def _number(value: float) -> str:
    return repr(float(value))


def render_vllm_metrics(metrics: Metrics, model_name: str, cache_info: Mapping[str, str]) -> str:
    """The /metrics body, `cache_info` giving cache_config_info's label values (the rest read None)."""
    base = f'engine="0",model_name="{model_name}"'
    scalars: dict[str, Mapping[tuple[tuple[str, str], ...], float]] = {
        "num_requests_running": {(): metrics.num_running_reqs},
        "kv_cache_usage_perc": {(): round(metrics.token_usage, 6)},
        "engine_sleep_state": {(("sleep_state", "awake"),): 1},
        "prompt_tokens": {(): metrics.prompt_tokens_total},
        "prompt_tokens_by_source": {(("source", "local_compute"),): metrics.prompt_tokens_total},
        "prefix_cache_queries": {(): metrics.prompt_tokens_total},
        "generation_tokens": {(): metrics.generation_tokens_total},
        "request_success": {(("finished_reason", "length"),): metrics.num_requests_total},
    }
    histograms: dict[str, Histogram] = {
        "time_to_first_token_seconds": metrics.ttft,
        "inter_token_latency_seconds": metrics.tpot,
        "e2e_request_latency_seconds": metrics.e2e,
        "request_prompt_tokens": metrics.request_prompt_tokens,
        "request_generation_tokens": metrics.request_generation_tokens,
        "iteration_tokens_total": metrics.steps,
    }
    lines: list[str] = []
    for family in FAMILIES:
        if family.info_labels:
            labels = ",".join(f'{k}="{cache_info.get(k, "None")}"' for k in family.info_labels)
            _head(lines, family, family.name, "gauge")
            lines.append(f"vllm:{family.name}{{{labels},{base}}} 1.0")
        elif family.kind == "histogram":
            _histogram(lines, family, base, histograms.get(family.name), metrics.started_at)
        else:
            values = scalars.get(family.name, {})
            name = f"{family.name}_total" if family.kind == "counter" else family.name
            _head(lines, family, name, family.kind)
            for extra in family.variants:
                lines.append(f"vllm:{name}{{{_labels(base, extra)}}} {_number(values.get(extra, 0))}")
            if family.kind == "counter":
                _created(lines, family, base, metrics.started_at)
    return "\n".join(lines) + "\n"


def _labels(base: str, extra: tuple[tuple[str, str], ...]) -> str:
    return base + "".join(f',{k}="{v}"' for k, v in extra)


def _head(lines: list[str], family: Family, name: str, kind: str) -> None:
    lines += [f"# HELP vllm:{name} {family.help}", f"# TYPE vllm:{name} {kind}"]


def _created(lines: list[str], family: Family, base: str, started_at: float) -> None:
    _head(lines, family, f"{family.name}_created", "gauge")
    for extra in family.variants:
        lines.append(f"vllm:{family.name}_created{{{_labels(base, extra)}}} {_number(started_at)}")


def _histogram(lines: list[str], family: Family, base: str, h: Histogram | None, started_at: float) -> None:
    _head(lines, family, family.name, "histogram")
    counts = h.counts if h is not None and h.buckets == family.buckets else [0] * len(family.buckets)
    n, total = (h.n, h.total) if h is not None else (0, 0.0)
    for bound, count in zip(family.buckets, counts, strict=True):
        lines.append(f'vllm:{family.name}_bucket{{{base},le="{float(bound)}"}} {_number(count)}')
    lines.append(f'vllm:{family.name}_bucket{{{base},le="+Inf"}} {_number(n)}')
    lines.append(f"vllm:{family.name}_count{{{base}}} {_number(n)}")
    lines.append(f"vllm:{family.name}_sum{{{base}}} {_number(total)}")
    _created(lines, family, base, started_at)
