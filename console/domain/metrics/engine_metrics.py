"""The engine's own numbers from its Prometheus `/metrics`: counter rates, histogram quantiles, figures.

Values follow Prometheus' own rules, so they agree with a dashboard built on the same series:
- a counter's increase over a window adds the increase of each scrape interval; a value lower than the
  one before is a reset (the engine restarted), and the new value is the increase since then
  (`rate()`'s rule);
- a histogram's window is the difference of its cumulative buckets, and a reset interval counts its
  new buckets whole; quantiles interpolate linearly inside the bucket that holds the rank, and a rank
  in the `+Inf` bucket answers the highest finite bound (`histogram_quantile()`'s rule).
A figure whose series the engine does not export is None ("not exported"), never zero.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

#: Rates (tokens/s) are taken over the last this-many seconds of scrapes.
RATE_WINDOW_S = 10.0
#: TTFT and ITL quantiles, preemptions and cache hit rates cover the last minute.
LATENCY_WINDOW_S = 60.0
#: Scrapes kept for the sparklines and windows.
HISTORY_S = 600.0


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram: (upper bound, observations at or below it), ascending, `+Inf` last."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class EngineScrape:
    """One reading of an engine's `/metrics`, summed over its data-parallel replicas.

    Gauges are as read; counters are cumulative (rates come from two or more scrapes). None: the
    engine does not export that series.
    """

    taken_at: float
    """POSIX seconds when the scrape was taken."""
    engine: str
    """"sglang" or "vllm": whose names were read."""
    running_requests: float | None = None
    waiting_requests: float | None = None
    kv_cache_usage: float | None = None
    """Share of the KV cache in use, 0..1."""
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    preemptions_total: float | None = None
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    spec_drafts_total: float | None = None
    spec_draft_tokens_total: float | None = None
    spec_accepted_tokens_total: float | None = None
    cache_hit_rate: float | None = None
    """SGLang's own prefix-cache hit rate gauge (vLLM's comes from its two counters)."""
    spec_accept_length: float | None = None
    """SGLang's mean accepted draft length gauge."""
    spec_accept_rate: float | None = None
    """SGLang's draft acceptance rate gauge."""
    ttft: Histogram | None = None
    itl: Histogram | None = None
    steps_total: float | None = None
    """vLLM: `iteration_tokens_total_count`, one observation per engine step with output (a heartbeat)."""
    realtime_tokens_total: float | None = None
    """SGLang (newer builds): `realtime_tokens_total`, all modes, moved every decode step and prefill chunk."""
    notes: tuple[str, ...] = ()
    """What the reading skipped (a series that could not be read), one line each, printable."""


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of cumulative buckets, as Prometheus' `histogram_quantile` computes it.

    Args:
        q: the quantile, 0..1.
        buckets: (upper bound, cumulative count) pairs; the last bound must be `+Inf`.

    Returns:
        The estimate, or None when it is undefined (no observations, no `+Inf` bucket, q outside 0..1).
    """
    if not 0 <= q <= 1 or len(buckets) < 2:
        return None
    ordered = sorted(buckets)
    if not math.isinf(ordered[-1][0]):
        return None
    counts, top = [], 0.0
    for _, count in ordered:  # Prometheus repairs non-monotonic counts the same way
        top = max(top, count)
        counts.append(top)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    b = next(i for i, count in enumerate(counts) if count >= rank)
    if b == len(ordered) - 1:
        return ordered[-2][0]
    if b == 0 and ordered[0][0] <= 0:
        return ordered[0][0]
    start, end, in_bucket = 0.0, ordered[b][0], counts[b]
    if b > 0:
        start = ordered[b - 1][0]
        in_bucket -= counts[b - 1]
        rank -= counts[b - 1]
    if in_bucket <= 0:
        return end
    return start + (end - start) * (rank / in_bucket)


def counter_increase(values: Iterable[float | None]) -> float | None:
    """How much a counter grew over successive readings, resets included (None if never read twice).

    A counter never goes down: a lower reading is a reset, and a negative or non-finite one is not a
    counter's reading at all, so the increase is never negative.
    """
    total, previous, pairs = 0.0, None, 0
    for value in values:
        if value is None or not 0 <= value < math.inf:
            continue
        if previous is not None:
            total += value - previous if value >= previous else value
            pairs += 1
        previous = value
    return total if pairs else None


def histogram_increase(readings: Sequence[Histogram | None]) -> Histogram | None:
    """The observations a histogram gained over successive readings, resets included."""
    present = [h for h in readings if h is not None]
    if len(present) < 2:
        return None
    gained: dict[float, float] = {}
    count = total = 0.0
    for before, after in pairwise(present):
        bounds = [b for b, _ in after.buckets]
        reset = (
            after.count < before.count
            or bounds != [b for b, _ in before.buckets]
            or any(a < b for (_, a), (_, b) in zip(after.buckets, before.buckets, strict=True))
        )
        if reset:  # the engine restarted: everything it holds now is new
            delta = list(after.buckets)
            d_count, d_sum = after.count, after.sum
        else:
            delta = [(bound, a - b) for (bound, a), (_, b) in zip(after.buckets, before.buckets, strict=True)]
            d_count, d_sum = after.count - before.count, after.sum - before.sum
        for bound, value in delta:
            gained[bound] = gained.get(bound, 0.0) + value
        count += d_count
        total += d_sum
    return Histogram(tuple(sorted(gained.items())), count, total)


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """What the console shows of an engine's own numbers, now."""

    age_s: float
    """Seconds since the newest scrape."""
    running_requests: float | None
    waiting_requests: float | None
    kv_cache_usage: float | None
    generation_tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    preemptions: float | None = None
    """Preemptions in the last minute."""
    prefix_cache_hit_rate: float | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    window_s: float = 0.0
    """The seconds the latency quantiles cover (up to a minute; less right after the first scrapes)."""
    notes: tuple[str, ...] = ()
    """What the newest reading skipped (EngineScrape.notes)."""

    def to_json(self) -> dict[str, Any]:
        """The `metrics` object of `status --json`."""

        def r(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "age_s": r(self.age_s, 2),
            "running_requests": self.running_requests,
            "waiting_requests": self.waiting_requests,
            "kv_cache_usage": r(self.kv_cache_usage, 4),
            "generation_tokens_per_s": r(self.generation_tokens_per_s, 2),
            "prompt_tokens_per_s": r(self.prompt_tokens_per_s, 2),
            "ttft_p50_s": r(self.ttft_p50_s, 4),
            "ttft_p99_s": r(self.ttft_p99_s, 4),
            "itl_p50_s": r(self.itl_p50_s, 5),
            "itl_p99_s": r(self.itl_p99_s, 5),
            "preemptions": self.preemptions,
            "prefix_cache_hit_rate": r(self.prefix_cache_hit_rate, 4),
            "spec_accept_length": r(self.spec_accept_length, 3),
            "spec_accept_rate": r(self.spec_accept_rate, 4),
            "window_s": r(self.window_s, 1),
            "notes": list(self.notes),
        }


@dataclass
class MetricsHistory:
    """The scrapes of one engine over the last `HISTORY_S` seconds, and the figures they give."""

    history_s: float = HISTORY_S
    scrapes: deque[EngineScrape] = field(default_factory=deque)

    def add(self, scrape: EngineScrape) -> None:
        """Keep a scrape (in time order; an older one than the newest is ignored)."""
        if self.scrapes and scrape.taken_at <= self.scrapes[-1].taken_at:
            return
        self.scrapes.append(scrape)
        while self.scrapes and self.scrapes[0].taken_at < scrape.taken_at - self.history_s:
            self.scrapes.popleft()

    def _window(self, seconds: float) -> list[EngineScrape]:
        """The newest scrape and every one within `seconds` before it, plus the one just before that."""
        if not self.scrapes:
            return []
        newest = self.scrapes[-1].taken_at
        inside = [s for s in self.scrapes if s.taken_at >= newest - seconds]
        older = [s for s in self.scrapes if s.taken_at < newest - seconds]
        if len(inside) < 2 and older:
            inside.insert(0, older[-1])  # a slow poll: use the interval that spans the window
        return inside

    def rate(self, name: str, seconds: float = RATE_WINDOW_S) -> float | None:
        """A counter's per-second rate over the window (None: not exported, or one scrape only)."""
        window = self._window(seconds)
        span = window[-1].taken_at - window[0].taken_at if len(window) > 1 else 0.0
        grown = counter_increase(getattr(s, name) for s in window)
        return grown / span if grown is not None and span > 0 else None

    def figures(self, now: float) -> EngineFigures | None:
        """The figures at `now` (POSIX seconds); None before the first scrape."""
        if not self.scrapes:
            return None
        last = self.scrapes[-1]
        window = self._window(LATENCY_WINDOW_S)
        ttft = histogram_increase([s.ttft for s in window])
        itl = histogram_increase([s.itl for s in window])

        def grown(name: str) -> float | None:
            return counter_increase(getattr(s, name) for s in window)

        hit_rate = _ratio(grown("prefix_cache_hits_total"), grown("prefix_cache_queries_total"))
        accepted = grown("spec_accepted_tokens_total")
        drafts = _ratio(accepted, grown("spec_drafts_total"))
        accept_rate = _ratio(accepted, grown("spec_draft_tokens_total"))
        return EngineFigures(
            age_s=max(0.0, now - last.taken_at),
            running_requests=last.running_requests,
            waiting_requests=last.waiting_requests,
            kv_cache_usage=last.kv_cache_usage,
            generation_tokens_per_s=self.rate("generation_tokens_total"),
            prompt_tokens_per_s=self.rate("prompt_tokens_total"),
            ttft_p50_s=histogram_quantile(0.5, ttft.buckets) if ttft else None,
            ttft_p99_s=histogram_quantile(0.99, ttft.buckets) if ttft else None,
            itl_p50_s=histogram_quantile(0.5, itl.buckets) if itl else None,
            itl_p99_s=histogram_quantile(0.99, itl.buckets) if itl else None,
            preemptions=grown("preemptions_total"),
            prefix_cache_hit_rate=hit_rate if hit_rate is not None else last.cache_hit_rate,
            spec_accept_length=1 + drafts if drafts is not None else last.spec_accept_length,
            spec_accept_rate=accept_rate if accept_rate is not None else last.spec_accept_rate,
            window_s=window[-1].taken_at - window[0].taken_at if len(window) > 1 else 0.0,
            notes=last.notes,
        )

    def series(self, name: str, points: int = 60) -> list[float]:
        """A sparkline's values: a gauge as read, or a counter's rate per scrape interval (`*_total`)."""
        scrapes = list(self.scrapes)[-(points + 1) :]
        if name.endswith("_total"):
            out = []
            for before, after in pairwise(scrapes):
                grown = counter_increase([getattr(before, name), getattr(after, name)])
                span = after.taken_at - before.taken_at
                if grown is not None and span > 0:
                    out.append(grown / span)
            return out[-points:]
        return [v for s in scrapes[-points:] if (v := getattr(s, name)) is not None]
