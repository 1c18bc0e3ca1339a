"""What the watch daemon writes to each host's rolling record (docs/recorder.md): unit states as they
change, every journal line it follows, the engine's and the GPUs' samples, health, the serving verdict,
and the alerts' transitions; and the incidents' bundles cut from it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from console.hosts.state_dir import state_dir
from console.ops.recorder import FLUSH_S, RecordWriter

#: Engine scalars kept per sample (the histograms are left out: they are most of a scrape's size).
METRIC_FIELDS = ("running_requests", "waiting_requests", "kv_cache_usage", "prompt_tokens_total",
                 "generation_tokens_total", "preemptions_total", "cache_hit_rate")


def record_folder(state_root: Path, host: str) -> Path:
    return state_root / "record" / host


class HostRecording:
    """One host's record as the daemon feeds it; every call is cheap and never raises into the watch."""

    def __init__(self, folder: Path, cap_bytes: int, *, clock: Callable[[], float] = time.time,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.writer = RecordWriter(folder, cap_bytes=cap_bytes, clock=clock)
        self.folder = folder
        self._states: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._serving: dict[str, tuple[Any, ...]] = {}
        self._say = say
        self._broken = False

    def _add(self, kind: str, ts: float | None = None, **fields: Any) -> None:
        if self._broken:
            return
        try:
            self.writer.add(kind, ts, **fields)
        except OSError as exc:  # a full disk: the watch goes on without its record, said once
            self._broken = True
            self._say(f"record {self.folder}: not written any more ({exc.strerror or exc})")

    def tick(self) -> None:
        if not self._broken:
            try:
                self.writer.tick()
            except OSError as exc:
                self._broken = True
                self._say(f"record {self.folder}: not written any more ({exc.strerror or exc})")

    def states(self, node: str, service: str, states: Sequence[Any]) -> None:
        for st in states:
            now = (st.active, st.sub, st.result, st.main_pid)
            if self._states.get((node, st.unit)) != now:
                self._states[(node, st.unit)] = now
                self._add("unit_state", node=node, service=service, unit=st.unit, active=st.active, sub=st.sub,
                          result=st.result, main_pid=st.main_pid, since=st.since, origin="watch")

    def journal(self, node: str, service: str, unit: str, entry: Any) -> None:
        self._add("journal", entry.ts, node=node, service=service, unit=entry.unit or unit, message=entry.message,
                  source=entry.source, priority=entry.priority, pid=entry.pid)

    def health(self, service: str, sample: Any) -> None:
        self._add("health", service=service, status=sample.status, http_status=sample.http_status,
                  latency_s=sample.latency_s, error=sample.error)

    def metrics(self, service: str, scrape: Any) -> None:
        self._add("metrics", service=service, **{k: getattr(scrape, k, None) for k in METRIC_FIELDS})

    def gpus(self, snapshot: Any) -> None:
        if snapshot.error is not None:
            self._add("gpu", error=snapshot.error)
            return
        keep = ("index", "used_mib", "total_mib", "util_pct", "temp_c", "power_w", "xid")
        self._add("gpu", gpus=[{k: getattr(g, k) for k in keep} for g in snapshot.gpus])

    def serving(self, service: str, verdict: Any) -> None:
        """The serving verdict (a ServingState), recorded when it changes."""
        fields = dataclasses.asdict(verdict) if dataclasses.is_dataclass(verdict) else {"state": str(verdict)}
        key = (fields.get("state"), fields.get("unit"), fields.get("since"))
        if self._serving.get(service) == key:
            return
        self._serving[service] = key
        self._add("triage", service=service, verdict="serving", **{k: v for k, v in fields.items()
                                                                    if isinstance(v, (str, int, float, type(None)))})

    def alert(self, kind: str, alert: Any) -> None:
        self._add("verdict", service=alert.label("service") or None,
                  result={"alert": alert.label("alertname"), "transition": kind,
                          "summary": alert.annotation("summary"), "unit": alert.label("unit") or None})

    def close(self) -> None:
        try:
            self.writer.close()
        except OSError:
            pass


def open_recordings(hosts: Sequence[Any], state_root: Path | None,
                    say: Callable[[str], None]) -> dict[str, HostRecording]:
    """A record for each host whose `record_cap_mib` is not 0, in `<state dir>/record/<host>/`."""
    out: dict[str, HostRecording] = {}
    for host in hosts:
        cap = host.config.record_cap_mib
        if not cap:
            continue
        root = state_root or state_dir()
        try:
            out[host.name] = HostRecording(record_folder(root, host.name), int(cap * (1 << 20)), say=say)
        except OSError as exc:
            say(f"record of {host.name}: not kept ({exc.strerror or exc})")
    return out


async def tick_recordings(recordings: dict[str, HostRecording]) -> None:
    """Write each record's buffer once a second (what a crash may lose), until cancelled."""
    try:
        while True:
            await asyncio.sleep(FLUSH_S / 2)
            for recording in recordings.values():
                recording.tick()
    finally:
        for recording in recordings.values():
            recording.close()
