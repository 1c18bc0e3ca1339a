"""The serving benchmark's figures, as `vllm bench serve` and sglang.bench_serving define them.

Pure maths over finished requests, no I/O:
- TTFT: request sent -> first chunk with non-empty content;
- TPOT, per request: (E2E - TTFT) / (output tokens - 1); a request with one output token has none;
- ITL: the gaps between successive content chunks, pooled over every request;
- E2E latency: request sent -> last byte;
- throughputs: completed requests, output tokens, input + output tokens, each over the wall duration;
- mean, median and p99 of each (ITL also p95), percentiles interpolated linearly as numpy's default.

Where vLLM prints 0 for a figure with no samples (every request failed, or one token each), these are
None: no sample is not a zero latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.domain.metrics import EngineFigures

#: Where a request's output-token count came from.
FROM_USAGE = "usage"
FROM_CHUNKS = "chunks"


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request as the client saw it. Times are seconds from the moment it was sent."""

    ok: bool
    prompt_tokens: int
    output_tokens: int = 0
    tokens_from: str = FROM_CHUNKS
    """"usage" when the server's usage.completion_tokens gave the count, else "chunks"."""
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    e2e_s: float = 0.0
    error: str | None = None

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1), or None for a request with fewer than two tokens."""
        if not self.ok or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def read_whole(self) -> bool:
        """Every chunk of a stream of several came in one read: the client was not reading while the server
        streamed (its CPU taken), so its TTFT is the whole request and its TPOT 0, not the engine's."""
        return self.ok and len(self.itl_s) > 0 and max(self.itl_s) == 0.0


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The `pct`-th percentile with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000.0, 3)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Mean, median and tail percentiles of one figure, in milliseconds (None without samples)."""

    mean_ms: float | None
    median_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    count: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Distribution:
        return cls(
            mean_ms=_ms(mean(seconds)),
            median_ms=_ms(percentile(seconds, 50)),
            p95_ms=_ms(percentile(seconds, 95)),
            p99_ms=_ms(percentile(seconds, 99)),
            max_ms=_ms(max(seconds) if seconds else None),
            count=len(seconds),
        )


#: A stream that went this long between two tokens ran through a stall (a hung forward, a wedged rank, a
#: stopped process): no engine takes 30 s for one decode step of a healthy batch (SGLang's own health
#: check gives up after 20 s without output), so the level's figures are the stall's, not the layout's.
STALL_GAP_S = 30.0


def stall_why(max_itl_ms: float | None) -> str | None:
    """Why a level with this longest inter-token gap measured a stall, not the layout; None if it did not."""
    if max_itl_ms is None or max_itl_ms < STALL_GAP_S * 1000:
        return None
    return (f"stalled: a stream went {max_itl_ms / 1000:.1f} s without a token (max ITL {max_itl_ms:.0f} ms; "
            f"a gap of {STALL_GAP_S:.0f} s or more is a stall, not a measurement)")


def level_ok(completed: int, failed: int) -> bool:
    """False for a failed level: requests failed and none succeeded. It measured nothing (the engine
    died, or never answered), so it is never a figure of 0 tok/s, nor a layout's best."""
    return completed > 0 or failed == 0


@dataclass(frozen=True, slots=True)
class ProbeSummary:
    """One load level's figures (a concurrency, or a request rate)."""

    concurrency: int | None
    request_rate: float | None
    num_prompts: int
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    tokens_from: str
    """"usage", "chunks", or "mixed" when some requests had usage and some did not."""
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2el: Distribution
    mean_concurrency: float
    """SGLang's "Concurrency": the sum of E2E latencies over the wall duration."""
    errors: tuple[str, ...] = ()
    """The first few distinct failure messages."""
    truncated: bool = False
    """True when --max-duration ended the level before every prompt was sent and answered."""
    whole_streams: int = 0
    """Completed requests whose stream came in one read (`RequestResult.read_whole`)."""

    @property
    def why(self) -> str | None:
        """Why the level measured nothing of the layout: it ran through a stall (STALL_GAP_S)."""
        return stall_why(self.itl.max_ms)

    @property
    def ok(self) -> bool:
        return level_ok(self.completed, self.failed) and self.why is None

    def _per_s(self, amount: float) -> float:
        return round(amount / self.duration_s, 3) if self.duration_s > 0 else 0.0

    @property
    def request_throughput(self) -> float:
        return self._per_s(self.completed)

    @property
    def output_throughput(self) -> float:
        return self._per_s(self.total_output_tokens)

    @property
    def total_token_throughput(self) -> float:
        return self._per_s(self.total_input_tokens + self.total_output_tokens)

    @property
    def per_user_tokens_per_s(self) -> float | None:
        """Decode speed one request sees: 1000 / mean TPOT (aiconfigurator's tokens/s/user)."""
        tpot = self.tpot.mean_ms
        return round(1000.0 / tpot, 3) if tpot else None

    def to_json(self) -> dict[str, Any]:
        """vLLM's `--save-result` keys for this level (ms figures; None where there is no sample)."""
        out: dict[str, Any] = {
            "concurrency": self.concurrency,
            # inf (everything at once) as the string "inf": JSON has no infinity
            "request_rate": "inf" if self.request_rate == math.inf else self.request_rate,
            "num_prompts": self.num_prompts,
            "completed": self.completed,
            "failed": self.failed,
            "duration_s": round(self.duration_s, 3),
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "output_tokens_from": self.tokens_from,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
            "per_user_tokens_per_s": self.per_user_tokens_per_s,
            "mean_concurrency": round(self.mean_concurrency, 3),
        }
        for name, dist, tails in (("ttft", self.ttft, ("p99",)), ("tpot", self.tpot, ("p99",)),
                                  ("itl", self.itl, ("p95", "p99")), ("e2el", self.e2el, ("p99",))):
            out[f"mean_{name}_ms"] = dist.mean_ms
            out[f"median_{name}_ms"] = dist.median_ms
            for tail in tails:
                out[f"{tail}_{name}_ms"] = getattr(dist, f"{tail}_ms")
        out["max_itl_ms"] = self.itl.max_ms
        out["why"] = self.why
        out["errors"] = list(self.errors)
        out["truncated"] = self.truncated
        out["whole_streams"] = self.whole_streams
        return out


def summarize(
    results: Sequence[RequestResult],
    duration_s: float,
    *,
    concurrency: int | None,
    request_rate: float | None = None,
    num_prompts: int | None = None,
    truncated: bool = False,
) -> ProbeSummary:
    """The level's figures from its requests (failed ones count only as failed)."""
    done = [r for r in results if r.ok]
    sources = {r.tokens_from for r in done}
    tokens_from = sources.pop() if len(sources) == 1 else ("mixed" if sources else FROM_CHUNKS)
    errors: list[str] = []
    for r in results:
        if not r.ok and r.error and r.error not in errors and len(errors) < 5:
            errors.append(r.error)
    return ProbeSummary(
        concurrency=concurrency,
        request_rate=request_rate,
        num_prompts=len(results) if num_prompts is None else num_prompts,
        completed=len(done),
        failed=len(results) - len(done),
        duration_s=duration_s,
        total_input_tokens=sum(r.prompt_tokens for r in done),
        total_output_tokens=sum(r.output_tokens for r in done),
        tokens_from=tokens_from,
        ttft=Distribution.of([r.ttft_s for r in done if r.ttft_s is not None]),
        tpot=Distribution.of([t for r in done if (t := r.tpot_s) is not None]),
        itl=Distribution.of([gap for r in done for gap in r.itl_s]),
        e2el=Distribution.of([r.e2e_s for r in done]),
        mean_concurrency=sum(r.e2e_s for r in done) / duration_s if duration_s > 0 else 0.0,
        errors=tuple(errors),
        truncated=truncated,
        whole_streams=sum(r.read_whole for r in done),
    )


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One level of one probe, with what was probed."""

    host: str
    service: str
    layout: str | None
    engine: str
    model: str
    summary: ProbeSummary
    taken_at: float
    engine_view: EngineFigures | None = None
    """The engine's own figures over the level, from its /metrics before and after (None: not read)."""

    def to_json(self) -> dict[str, Any]:
        """The `probe --json` line: who and what, vLLM's result keys, then the engine's own view."""
        return {"event": "probe", "host": self.host, "service": self.service, "layout": self.layout,
                "engine": self.engine, "model": self.model,
                "outcome": "measured" if self.summary.ok else "failed", **self.summary.to_json(),
                "taken_at": round(self.taken_at, 3),
                "engine_metrics": self.engine_view.to_json() if self.engine_view else None}
