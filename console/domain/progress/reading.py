"""One reading of a service's progress signals: the per-step series, the gauges, the console's own requests.

Which series move per step (docs/stalls.md, from the engines' code):
- vLLM: `generation_tokens_total` (+= new tokens each step with output), `iteration_tokens_total_count`
  (one observation per such step), `prompt_tokens_total` (when a prompt's first token appears).
- SGLang: its token counters move only when a request finishes, so the per-token series come first:
  `inter_token_latency_seconds_count` (older `time_per_output_token_seconds_count`),
  `time_to_first_token_seconds_count`, and `realtime_tokens_total` (newer builds: every decode step and
  every prefill chunk); `generation_tokens_total` is kept as the finish-time witness.
The running and waiting gauges are read, never trusted alone: a wedged vLLM read running=0 (vllm#46811).
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.metrics import EngineScrape


@dataclass(frozen=True, slots=True)
class ProgressReading:
    """What the console saw of one service at `taken_at` (POSIX seconds); None: not read."""

    taken_at: float
    engine: str
    counters: tuple[tuple[str, float], ...] = ()
    """(series name, cumulative value) of each per-step series the engine exports."""
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    ours: int = 0
    """The console's own requests in flight to the service (a probe's, the canary)."""
    log_moved_at: float | None = None
    """When the newest journal line that proves a step was written (SGLang's batch lines, vLLM's stats)."""
    ready: bool = True
    """The service has answered ready since it started: before READY a start is never stalled."""
    health_failed: str | None = None
    """Why the engine's own generating health check failed (SGLang's /health 503), in words."""
    canary_timed_out_s: float | None = None
    """The canary's one-token request got no first token within this many seconds."""


def _count(scrape: EngineScrape, which: str) -> float | None:
    hist = getattr(scrape, which)
    return None if hist is None else hist.count


def step_series(scrape: EngineScrape) -> tuple[tuple[str, float], ...]:
    """The per-step series of one scrape, by engine, those the engine does not export left out."""
    e = scrape.engine
    if e == "vllm":
        pairs = [
            ("vllm:generation_tokens_total", scrape.generation_tokens_total),
            ("vllm:iteration_tokens_total_count", scrape.steps_total),
            ("vllm:prompt_tokens_total", scrape.prompt_tokens_total),
        ]
    else:
        pairs = [
            ("sglang:inter_token_latency_seconds_count", _count(scrape, "itl")),
            ("sglang:time_to_first_token_seconds_count", _count(scrape, "ttft")),
            ("sglang:realtime_tokens_total", scrape.realtime_tokens_total),
            ("sglang:generation_tokens_total", scrape.generation_tokens_total),
        ]
    return tuple((name, value) for name, value in pairs if value is not None)


def reading_from_scrape(scrape: EngineScrape | None, *, taken_at: float, engine: str, **extra: object) -> ProgressReading:
    """A reading from one `/metrics` scrape (None: none could be read) and what else the caller knows
    (`ours`, `log_moved_at`, `ready`, `health_failed`, `canary_timed_out_s`, and gauges from the journal)."""
    if scrape is None:
        return ProgressReading(taken_at=taken_at, engine=engine, **extra)  # type: ignore[arg-type]
    fields: dict[str, object] = {
        "counters": step_series(scrape),
        "running": scrape.running_requests,
        "waiting": scrape.waiting_requests,
        "kv_usage": scrape.kv_cache_usage,
    }
    fields.update({k: v for k, v in extra.items() if v is not None or k not in fields})
    return ProgressReading(taken_at=taken_at, engine=scrape.engine, **fields)  # type: ignore[arg-type]
