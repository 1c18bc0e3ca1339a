"""An engine's `/metrics` text -> one EngineScrape, for SGLang's `sglang:` and vLLM's `vllm:` names.

The text is read by prometheus_client's own parser (the reference for the exposition format). Series are
looked up by sample name, so a line without `# TYPE` reads the same. Names drift between versions: each
figure lists the names to try, newest first (vLLM's `kv_cache_usage_perc` was `gpu_cache_usage_perc`,
its `inter_token_latency_seconds` was `time_per_output_token_seconds`).

An engine exports one series per data-parallel replica (vLLM's `engine` label, SGLang's `dp_rank`) and
SGLang may add one per TP/PP/EP rank of the same replica: ranks of a replica report the same requests, so
one series per replica is kept and the replicas are summed (the KV cache usage is their mean).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from console.domain.metrics.engine_metrics import EngineScrape, Histogram
from console.domain.safe_text import printable

#: Labels that tell ranks of one replica apart: they do not make a series count twice.
_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "ep_rank", "attn_tp_rank", "le"})

_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running_requests": ("vllm:num_requests_running",),
        "waiting_requests": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "preemptions_total": ("vllm:num_preemptions_total",),
        "prefix_cache_queries_total": (
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ),
        "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "spec_drafts_total": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
        "steps_total": ("vllm:iteration_tokens_total_count",),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    },
    "sglang": {
        "running_requests": ("sglang:num_running_reqs",),
        "waiting_requests": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "generation_tokens_total": ("sglang:generation_tokens_total",),
        "cache_hit_rate": ("sglang:cache_hit_rate",),
        "spec_accept_length": ("sglang:spec_accept_length",),
        "spec_accept_rate": ("sglang:spec_accept_rate",),
        "realtime_tokens_total": ("sglang:realtime_tokens_total",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    },
}
_MEAN = frozenset({"kv_cache_usage", "cache_hit_rate", "spec_accept_length", "spec_accept_rate"})


class MetricsTextError(ValueError):
    """The text is not the Prometheus exposition format (one line saying where)."""


#: What prometheus_client's parser raises on a line it cannot read.
_PARSER_ERRORS = (ValueError, TypeError, IndexError)


Labels = tuple[tuple[str, str], ...]
Samples = dict[str, dict[Labels, float]]
#: How much of a series' text a note quotes.
_NOTE_CHARS = 80


def _families(text: str) -> tuple[list[Any], list[str]]:
    """The parsed families, and notes on what was skipped.

    The parser stops at the first line it cannot read; then each line is read on its own (sample names
    are all this module looks at, so the `# TYPE` lines are not needed), and the unreadable ones are
    skipped with a note. Text in which no line reads is not Prometheus text.
    """
    try:
        return list(text_string_to_metric_families(text)), []
    except _PARSER_ERRORS as exc:
        first_error = str(exc).strip()[:120]
    families, bad = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            families += text_string_to_metric_families(line + "\n")
        except _PARSER_ERRORS:
            bad.append(number)
    if not families:
        raise MetricsTextError(f"not Prometheus text: {printable(first_error)}")
    return families, [f"skipped {len(bad)} unreadable line(s) of /metrics (the first is line {bad[0]})"]


def _bound(text: str) -> float | None:
    """A bucket's `le` as a number (`+Inf` included), or None when it is not one."""
    try:
        return float(text)
    except ValueError:
        return None


def _samples(text: str) -> tuple[Samples, list[str]]:
    """sample name -> {replica labels: value}, the first series of each replica kept; and the notes.

    A NaN or infinite value is legal exposition text for "no value": that series is not exported. A
    bucket whose `le` is not a number is one bad series: it is skipped with a note, the rest is read.
    """
    families, notes = _families(text)
    out: Samples = defaultdict(dict)
    for family in families:
        for sample in family.samples:
            value = float(sample.value)
            if not math.isfinite(value):
                continue
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in _RANK_LABELS))
            if "le" in sample.labels:
                if _bound(sample.labels["le"]) is None:
                    series = f"{sample.name}{{le={sample.labels['le']!r}}}"
                    notes.append(f"skipped {printable(series[:_NOTE_CHARS])}: le is not a number")
                    continue
                key += (("le", sample.labels["le"]),)
            out[sample.name].setdefault(key, value)
    return out, notes


def detect_engine(text: str) -> str | None:
    """ "vllm" or "sglang", by which names the text uses (None when neither)."""
    if "vllm:" in text:
        return "vllm"
    if "sglang:" in text:
        return "sglang"
    return None


def _value(samples: Samples, names: tuple[str, ...], mean: bool) -> float | None:
    for name in names:
        series = samples.get(name)
        if series:
            values = list(series.values())
            return sum(values) / len(values) if mean else sum(values)
    return None


def _histogram(samples: Samples, names: tuple[str, ...]) -> Histogram | None:
    for name in names:
        buckets = samples.get(f"{name}_bucket")
        if not buckets:
            continue
        by_bound: dict[float, float] = defaultdict(float)
        for labels, value in buckets.items():
            bound = dict(labels).get("le")
            if bound is not None:
                by_bound[float(bound)] += value
        count = _value(samples, (f"{name}_count",), mean=False)
        total = _value(samples, (f"{name}_sum",), mean=False)
        if not by_bound:
            continue
        ordered = tuple(sorted(by_bound.items()))
        return Histogram(ordered, count if count is not None else ordered[-1][1], total or 0.0)
    return None


def parse_metrics(text: str, taken_at: float, engine: str | None = None) -> EngineScrape:
    """Read one `/metrics` body.

    Args:
        text: the exposition text.
        taken_at: when it was scraped (POSIX seconds).
        engine: "sglang" or "vllm"; None to go by the names the text uses.

    Returns:
        The scrape; figures whose series are missing (or NaN) are None, and what was skipped is in its
        notes.

    Raises:
        MetricsTextError: the text cannot be parsed, or holds neither engine's names.
    """
    engine = engine if engine in _NAMES else detect_engine(text)
    if engine is None:
        raise MetricsTextError("no sglang: or vllm: series in /metrics")
    samples, notes = _samples(text)
    names = _NAMES[engine]
    values = {
        figure: _value(samples, series, figure in _MEAN)
        for figure, series in names.items()
        if figure not in ("ttft", "itl")
    }
    return EngineScrape(
        taken_at=taken_at,
        engine=engine,
        ttft=_histogram(samples, names["ttft"]),
        itl=_histogram(samples, names["itl"]),
        notes=tuple(notes),
        **values,
    )
