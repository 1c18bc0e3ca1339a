"""Probe a running service: the serving benchmark, against its engine once it is READY.

The engine is reached the way its health probe reaches it: directly at the service's URL, or through
the host's SSH port forward when `health_via = "ssh"`. A probe loads a production server, so callers
check read-only first (`require_writable`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from console.config import ServiceConfig
from console.domain.metrics import EngineFigures, EngineScrape, MetricsHistory
from console.domain.values import Engine
from console.errors import ConsoleError
from console.hosts.base import LockBusy
from console.hosts.endpoints import MetricsUnavailable, metrics_reader
from console.ops.explore.probe_client import ProbeClient
from console.ops.explore.probe_load import ProbeOptions, ProgressSink, build_prompts, run_level, warm_up
from console.ops.explore.probe_metrics import ProbeResult
from console.ops.status import running_layout, unit_states
from console.ops.switch import explore_lock_name

if TYPE_CHECKING:
    from console.hosts.base import Host
    from console.ops.audit import AuditLog
    from console.ops.explore.results_store import ResultsStore


__all__ = ["ProbeRefused", "ProbeResult", "probe_service", "probe_target", "service_base_url"]


class ProbeRefused(ConsoleError):
    """The probe cannot run: read-only, nothing ready to probe, or the server will not answer."""


async def service_base_url(host: Host, service: ServiceConfig) -> str:
    """The engine's base URL as this console reaches it: the health probe's (the port a simulated unit
    really serves on), through its forward if it has one."""
    probe = host.probes.get(service.name)
    url = getattr(probe, "url", None) or service.url
    forward = getattr(probe, "forward", None)
    if forward is None:
        return url.rstrip("/")
    port = await forward.local_port()
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"127.0.0.1:{port}", parts.path, "", "")).rstrip("/")


async def probe_target(host: Host, service: ServiceConfig, audit: AuditLog | None) -> str | None:
    """The running layout's name, once its health probe says ready.

    Raises:
        ProbeRefused: nothing runs, or it is not ready.
    """
    states = await unit_states(host, service)
    unit, layout = running_layout(host.name, service, states, audit)
    if unit is None:
        raise ProbeRefused(f"{host.name}/{service.name}: no layout is running; nothing to probe")
    probe = host.probes.get(service.name)
    sample = await probe.probe() if probe is not None else None
    if sample is None or sample.status != "ready":
        said = sample.error or f"HTTP {sample.http_status}" if sample else "no health probe"
        raise ProbeRefused(f"{host.name}/{service.name}: {unit} is not ready ({said}); probe after READY")
    return layout


async def _engine_scrape(reader) -> EngineScrape | None:
    """One reading of the engine's /metrics beside the probe; None when the engine does not give one."""
    if reader is None:
        return None
    try:
        return await reader.scrape()
    except MetricsUnavailable:
        return None


def _engine_view(before: EngineScrape | None, after: EngineScrape | None) -> EngineFigures | None:
    """The engine's figures between two readings: its own TTFT, ITL and tok/s over the level."""
    if before is None or after is None:
        return None
    history = MetricsHistory()
    history.add(before)
    history.add(after)
    return history.figures(after.taken_at)


ResultSink = Callable[[ProbeResult], None]
LevelProgress = Callable[[int | None, int, int, int, float], None]
"""(concurrency, requests done, requests in the level, output tokens so far, seconds)."""


async def probe_service(
    host: Host,
    service: ServiceConfig,
    options: ProbeOptions,
    *,
    audit: AuditLog | None = None,
    store: ResultsStore | None = None,
    explore_id: int | None = None,
    layout: str | None = None,
    on_result: ResultSink | None = None,
    on_progress: LevelProgress | None = None,
) -> list[ProbeResult]:
    """Warm up, then run each level of `options` against the service; record and report each level.

    A plain probe (no `explore_id`) holds the service's explore lock while it runs: it is refused while
    an explore (or a switch) of the service runs, and they are refused while it runs, so neither
    measures the other's load nor switches the engine under it.

    Raises:
        ProbeRefused: the service is not ready, its server does not answer `/v1/models`, or an explore
            or a switch of it runs.
        WarmupFailed: every warm-up request failed.
        UsageError: the dataset cannot be used.
    """
    if explore_id is not None:  # the explore's own probe: it holds the lock already
        return await _probe(host, service, options, audit, store, explore_id, layout, on_result, on_progress)
    try:
        async with host.lock(explore_lock_name(service)):
            return await _probe(host, service, options, audit, store, explore_id, layout, on_result, on_progress)
    except LockBusy as exc:
        raise ProbeRefused(f"{host.name}/{service.name}: an explore or a switch of it runs ({exc}); "
                           "probe after it") from None


async def _probe(host: Host, service: ServiceConfig, options: ProbeOptions, audit: AuditLog | None,
                 store: ResultsStore | None, explore_id: int | None, layout: str | None,
                 on_result: ResultSink | None, on_progress: LevelProgress | None) -> list[ProbeResult]:
    if layout is None:
        layout = await probe_target(host, service, audit)
    base = await service_base_url(host, service)
    limit = max(options.concurrency) if options.request_rate is None else (options.max_concurrency or 0)
    results: list[ProbeResult] = []
    async with ProbeClient(base, endpoint=options.endpoint, limit=limit, request_timeout_s=options.request_timeout_s,
                           every_choice=service.engine is Engine.VLLM) as client:
        try:
            client.model = await client.served_model()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ProbeRefused(f"{host.name}/{service.name}: {base}/v1/models did not answer: "
                               f"{str(exc) or type(exc).__name__}") from None
        await warm_up(client, options)
        reader = metrics_reader(host.probes.get(service.name), service.engine)
        for concurrency, rate in options.levels():
            sink: ProgressSink | None = None
            if on_progress is not None:
                sink = functools.partial(on_progress, concurrency)
            prompts = build_prompts(options, options.prompt_count(concurrency))
            before = await _engine_scrape(reader)
            summary = await run_level(client, prompts, concurrency=concurrency, request_rate=rate,
                                      seed=options.seed, max_duration_s=options.max_duration_s,
                                      on_progress=sink)
            engine_view = _engine_view(before, await _engine_scrape(reader))
            result = ProbeResult(host=host.name, service=service.name, layout=layout,
                                 engine=service.engine.value, model=client.model, summary=summary,
                                 taken_at=time.time(), engine_view=engine_view)
            if on_result is not None:  # shown before it is stored: a locked store never loses the level
                on_result(result)
            if store is not None:
                store.add_probe(result, options, explore_id=explore_id)
            results.append(result)
    return results
