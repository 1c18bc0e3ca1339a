"""An engine's own view of itself, from its `/metrics`: what `status` shows beside units, GPUs and health.

Rates need two readings, so a one-shot status scrapes twice, `interval_s` apart (1 s by default); the
latency quantiles then cover whatever the engine observed between them. A pane that polls keeps a
`MetricsHistory` and gets the last minute. Nothing is scraped while no unit of the service runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from console.domain.metrics import EngineFigures, EngineScrape, MetricsHistory
from console.hosts.endpoints import MetricsUnavailable, metrics_reader

if TYPE_CHECKING:
    from console.config import ServiceConfig
    from console.hosts.base import Host

#: Seconds between the two readings of a one-shot status.
STATUS_INTERVAL_S = 1.0


async def engine_figures(
    host: Host, service: ServiceConfig, *, running: bool, interval_s: float = STATUS_INTERVAL_S
) -> tuple[EngineFigures | None, str | None]:
    figures, why, _ = await engine_readings(host, service, running=running, interval_s=interval_s)
    return figures, why


async def engine_readings(
    host: Host, service: ServiceConfig, *, running: bool, interval_s: float = STATUS_INTERVAL_S
) -> tuple[EngineFigures | None, str | None, list[EngineScrape]]:
    """The engine's figures now, or None and the reason there are none.

    Args:
        host: the service's host.
        service: the service.
        running: whether one of its units runs (nothing is read otherwise).
        interval_s: seconds between the two readings that give the rates.
    """
    if not running:
        return None, "no unit running", []
    reader = metrics_reader(host.probes.get(service.name), service.engine)
    if reader is None:
        return None, "no HTTP endpoint to read /metrics from", []
    history = MetricsHistory()
    try:
        history.add(await reader.scrape())
        await asyncio.sleep(interval_s)
        history.add(await reader.scrape())
    except MetricsUnavailable as exc:
        if not history.scrapes:
            return None, str(exc), []
    return history.figures(time.time()), None, list(history.scrapes)


def metrics_json(figures: EngineFigures | None, reason: str | None) -> dict[str, Any]:
    """The `metrics` (and, when it is null, `metrics_error`) keys of a `status --json` line."""
    return {"metrics": figures.to_json() if figures else None, "metrics_error": None if figures else reason}


def latency_text(seconds: float | None) -> str:
    """`210 ms`, `1.25 s`, or `-` when there is none."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "not exported" if value is None else f"{value:.{digits}f}{unit}"


def figures_line(figures: EngineFigures | None, reason: str | None) -> str:
    """One human line: `3 running, 0 waiting, KV 41.0%, gen 812 tok/s, ... TTFT p50 210 ms p99 900 ms`."""
    if figures is None:
        return f"engine metrics: {reason or 'none'}"
    kv = "not exported" if figures.kv_cache_usage is None else f"{100 * figures.kv_cache_usage:.1f}%"
    parts = [
        f"{_number(figures.running_requests)} running",
        f"{_number(figures.waiting_requests)} waiting",
        f"KV {kv}",
        f"gen {_number(figures.generation_tokens_per_s, ' tok/s', 1)}",
        f"prompt {_number(figures.prompt_tokens_per_s, ' tok/s', 1)}",
        f"TTFT p50 {latency_text(figures.ttft_p50_s)} p99 {latency_text(figures.ttft_p99_s)}",
        f"ITL p50 {latency_text(figures.itl_p50_s)} p99 {latency_text(figures.itl_p99_s)}",
    ]
    line = "engine: " + ", ".join(parts + extra_figures(figures))
    return line + "".join(f" ({note})" for note in figures.notes)


def extra_figures(figures: EngineFigures) -> list[str]:
    """The figures only some engines export, when present: preemptions, prefix-cache hits, spec decoding."""
    out = []
    if figures.preemptions:
        out.append(f"{figures.preemptions:.0f} preemptions/min")
    if figures.prefix_cache_hit_rate is not None:
        out.append(f"prefix hits {100 * figures.prefix_cache_hit_rate:.1f}%")
    if figures.spec_accept_length is not None:
        out.append(f"spec accept length {figures.spec_accept_length:.2f}")
    return out
