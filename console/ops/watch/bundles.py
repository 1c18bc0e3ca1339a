"""The watch daemon's incident bundles (docs/bundle.md): when an alert of an incident fires, its window
of the host's rolling record is frozen into a bundle at once (within seconds, so the alert carries its
path as the `bundle` annotation), and written again, whole, once the window's `after_s` has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from console.config import ServiceConfig
from console.domain.alerts import Alert
from console.hosts.base import Host
from console.ops.bundle import WRITE_DEADLINE_S, Incident
from console.ops.recorder import write_incident_bundle
from console.ops.watch.recording import HostRecording


def alert_incident(alert: Alert) -> Incident:
    """The incident an alert is of: its name as the kind, its summary as the reason, its start as the verdict."""
    return Incident(kind=alert.label("alertname"), reason=alert.annotation("summary"),
                    unit=alert.label("unit") or None, started_at=alert.starts_at, verdict_at=alert.starts_at)


def _nodes(host: Host, service: ServiceConfig) -> list[dict[str, str]]:
    names = [host.name, *(p.name for p in host.config.peer_hosts)] if service.cluster is not None else [host.name]
    by_name = {host.name: host.config, **{p.name: p for p in host.config.peer_hosts}}
    return [{"name": n, "address": by_name[n].address or n} for n in dict.fromkeys(names)]


async def freeze(recording: HostRecording, state_root: Path, host: Host, service: ServiceConfig, alert: Alert,
                 evidence: str | None, *, clock: Callable[[], float] = time.time) -> Path:
    """Write the alert's bundle now from the record (what it holds up to this second); its path."""
    recording.writer.flush()  # the last second's records are in the bundle too
    incident = alert_incident(alert)

    def write() -> Path:
        path, _size = write_incident_bundle(
            recording.folder, state_root, host=host.name, service=service.name, engine=service.engine.value,
            nodes=_nodes(host, service), incident=incident, evidence=evidence,
            before_s=host.config.bundle_before_s, after_s=host.config.bundle_after_s, now=clock())
        return path

    async with asyncio.timeout(WRITE_DEADLINE_S):
        return await asyncio.to_thread(write)


async def complete_later(recording: HostRecording, state_root: Path, host: Host, service: ServiceConfig,
                         alert: Alert, evidence: str | None, say: Callable[[str], None], *,
                         sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                         clock: Callable[[], float] = time.time) -> None:
    """Write the bundle again once its window's end (`bundle_after_s` after the alert) has passed."""
    await sleep(max(0.0, alert.starts_at + host.config.bundle_after_s - clock()))
    try:
        path = await freeze(recording, state_root, host, service, alert, evidence, clock=clock)
    except (OSError, TimeoutError) as exc:
        say(f"{alert.label('alertname')} {host.name}/{service.name}: bundle not completed: {exc}")
        return
    say(f"{alert.label('alertname')} {host.name}/{service.name}: bundle complete: {path}")
