"""The engine's measured figures, and SGLang's /metrics (`sglang:` names) in prometheus_client's text format.

Latencies are measured in real (wall-clock) seconds, so they agree with what a client measures
whatever the time scale. vLLM's families are written by console/sim/vllm/metrics_text.py from the same figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
)
_TPOT_BUCKETS = (
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
)
_E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)
_TOKEN_COUNT_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)


@dataclass
class Histogram:
    """A cumulative histogram with fixed upper bounds."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.total += value
        self.n += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


@dataclass
class Metrics:
    """The engine's counters and gauges."""

    num_running_reqs: int = 0
    num_used_tokens: int = 0
    token_usage: float = 0.0
    gen_throughput: float = 0.0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    num_requests_total: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(_TTFT_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(_TPOT_BUCKETS))
    """Each gap between two tokens of a request (SGLang's time per output token, vLLM's ITL)."""
    e2e: Histogram = field(default_factory=lambda: Histogram(_E2E_BUCKETS))
    request_prompt_tokens: Histogram = field(default_factory=lambda: Histogram(_TOKEN_COUNT_BUCKETS))
    request_generation_tokens: Histogram = field(default_factory=lambda: Histogram(_TOKEN_COUNT_BUCKETS))
    started_at: float = field(default_factory=time.time)
    steps: Histogram = field(default_factory=lambda: Histogram(_TOKEN_COUNT_BUCKETS))
    """Tokens per engine step, one observation per step with output (vLLM's `iteration_tokens_total`)."""
    realtime_tokens: dict[str, int] = field(default_factory=dict)
    """SGLang's `realtime_tokens_total` by mode: every prefill chunk and every decode step."""

    def realtime(self, mode: str, n: int) -> None:
        self.realtime_tokens[mode] = self.realtime_tokens.get(mode, 0) + n

    @classmethod
    def with_buckets(cls, ttft: tuple[float, ...], tpot: tuple[float, ...], e2e: tuple[float, ...],
                     token_counts: tuple[float, ...]) -> Metrics:
        """Metrics whose histograms have an engine's own bounds (vLLM's differ from SGLang's)."""
        return cls(ttft=Histogram(ttft), tpot=Histogram(tpot), e2e=Histogram(e2e),
                   request_prompt_tokens=Histogram(token_counts),
                   request_generation_tokens=Histogram(token_counts))

    def request_started(self, prompt_tokens: int) -> None:
        self.prompt_tokens_total += prompt_tokens
        self.num_running_reqs += 1
        self.request_prompt_tokens.observe(prompt_tokens)

    def request_finished(self, produced: int, e2e_s: float) -> None:
        self.num_running_reqs = max(0, self.num_running_reqs - 1)
        self.num_requests_total += 1
        self.e2e.observe(e2e_s)
        self.request_generation_tokens.observe(produced)
        if self.num_running_reqs == 0:
            self.gen_throughput = 0.0
            self.num_used_tokens = 0
            self.token_usage = 0.0

    def generated(self, n: int) -> None:
        self.generation_tokens_total += n
        self.steps.observe(n)

    def observe_ttft(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def observe_tpot(self, seconds: float) -> None:
        self.tpot.observe(seconds)

    def set_throughput(self, tokens_per_s: float, running: int, used_tokens: int, usage: float) -> None:
        self.gen_throughput = tokens_per_s
        self.num_running_reqs = running
        self.num_used_tokens = used_tokens
        self.token_usage = usage

    def render(self, model_name: str) -> str:
        """The SGLang /metrics body (`sglang:` names)."""
        out = _Exposition("sglang", f'model_name="{model_name}"')
        out.gauge("num_running_reqs", "The number of running requests.", self.num_running_reqs)
        out.gauge("num_queue_reqs", "The number of requests in the waiting queue.", 0)
        out.gauge("num_used_tokens", "The number of used tokens.", self.num_used_tokens)
        out.gauge("token_usage", "The token usage.", round(self.token_usage, 4))
        out.gauge("gen_throughput", "The generation throughput (token/s).", round(self.gen_throughput, 2))
        out.gauge("cache_hit_rate", "The prefix cache hit rate.", 0.0)
        out.counter("prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens_total)
        out.counter(
            "generation_tokens", "Number of generation tokens processed.", self.generation_tokens_total
        )
        out.counter("num_requests", "Number of requests processed.", self.num_requests_total)
        for mode in ("prefill_compute", "prefill_cache", "decode"):
            out.counter("realtime_tokens", "Number of tokens processed, updated in real time.",
                        self.realtime_tokens.get(mode, 0), extra=f'mode="{mode}"', head=mode == "prefill_compute")
        out.histogram(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.ttft
        )
        out.histogram(
            "time_per_output_token_seconds", "Histogram of time per output token in seconds.", self.tpot
        )
        out.histogram(
            "e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", self.e2e
        )
        return out.text()


class _Exposition:
    """The Prometheus text format, as prometheus_client writes it (`name_total` for counters)."""

    def __init__(self, namespace: str, labels: str) -> None:
        self.namespace, self.labels = namespace, labels
        self.lines: list[str] = []

    def _head(self, name: str, help_text: str, kind: str) -> str:
        full = f"{self.namespace}:{name}"
        self.lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
        return full

    def gauge(self, name: str, help_text: str, value: float) -> None:
        full = self._head(name, help_text, "gauge")
        self.lines.append(f"{full}{{{self.labels}}} {float(value)}")

    def counter(self, name: str, help_text: str, value: float, extra: str = "", head: bool = True) -> None:
        full = self._head(f"{name}_total", help_text, "counter") if head else f"{self.namespace}:{name}_total"
        labels = f"{self.labels},{extra}" if extra else self.labels
        self.lines.append(f"{full}{{{labels}}} {float(value)}")

    def histogram(self, name: str, help_text: str, h: Histogram) -> None:
        full = self._head(name, help_text, "histogram")
        for bound, count in zip(h.buckets, h.counts, strict=True):
            self.lines.append(f'{full}_bucket{{le="{bound}",{self.labels}}} {float(count)}')
        self.lines.append(f'{full}_bucket{{le="+Inf",{self.labels}}} {float(h.n)}')
        self.lines.append(f"{full}_count{{{self.labels}}} {float(h.n)}")
        self.lines.append(f"{full}_sum{{{self.labels}}} {h.total}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
