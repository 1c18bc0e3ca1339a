"""Is each service still serving? The progress verdict (domain/progress) fed from a host's readings.

A one-shot `status` keeps the last memory per service in the state dir (`progress.json`) and judges
each run against it, so `status` run every few seconds names a stall once it has lasted `stall_after_s`.
The open console and the watch daemon keep the memory in hand (`ServingWatch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from console.domain.metrics import EngineScrape
from console.domain.progress import (
    STALL_AFTER_S,
    STALLED,
    UNKNOWN,
    GpuReading,
    Pending,
    ProgressMemory,
    ServingVerdict,
    judge,
    parse_batch_line,
    rank_words,
    reading_from_scrape,
)

if TYPE_CHECKING:
    from console.config import ServiceConfig
    from console.domain.values import GpuSnapshot, JournalEntry
    from console.hosts.base import Host
    from console.ops.status import ServiceStatus

#: The journal lines read for batch and stats lines on each verdict.
JOURNAL_LINES = 200
MEMORY_FILE = "progress.json"
#: vLLM's stats line covers this many seconds before it (VLLM_LOG_STATS_INTERVAL, 10 s).
VLLM_STATS_INTERVAL_S = 10.0
#: Batch and stats lines a followed journal keeps for the verdict.
BATCH_LINES_KEPT = 32


def engine_key(st: ServiceStatus) -> str | None:
    unit = st.active_state
    return None if unit is None else f"{unit.unit}:{unit.main_pid}"


def log_progress(entries: Sequence[JournalEntry]) -> tuple[float | None, int | None, int | None]:
    """(time of the newest line that proves a step, running and waiting from the newest progress line).

    A batch line is written as its step runs; vLLM's stats line averages the interval before it, so a
    throughput above 0 proves a step only at its start (VLLM_STATS_INTERVAL_S before the line)."""
    moved_at, running, waiting = None, None, None
    for entry in entries:
        line = parse_batch_line(entry.message)
        if line is None:
            continue
        running, waiting = line.running, line.waiting
        if line.moved:
            at = entry.ts - VLLM_STATS_INTERVAL_S if line.kind == "stats" else entry.ts
            moved_at = at if moved_at is None else max(moved_at, at)
    return moved_at, running, waiting


async def journal_tail(host: Host, unit: str, lines: int = JOURNAL_LINES) -> list[JournalEntry]:
    out: list[JournalEntry] = []
    with contextlib.suppress(Exception):  # no journal: the verdict stands on the metrics alone
        async for entry in host.services.journal(unit, follow=False, lines=lines):
            out.append(entry)
    return out


def service_gpus(snapshot: GpuSnapshot | None, node: str | None = None) -> list[GpuReading]:
    """The GPUs that hold a process (the service's ranks on this host); all of them when none says."""
    if snapshot is None:
        return []
    held = {p.gpu_index for p in snapshot.processes if p.gpu_index is not None}
    gpus = [g for g in snapshot.gpus if not held or g.index in held]
    return [GpuReading(g.index, g.util_pct, g.power_w, node) for g in gpus]


def health_failure(st: ServiceStatus) -> str | None:
    """SGLang's generating /health failing on a running engine, in words (vLLM's 503 is a dead engine)."""
    h = st.health
    if st.engine != "sglang" or h is None or h.status == "ready" or st.active_unit is None:
        return None
    if h.http_status == 503:
        return "SGLang /health answered 503 (its one-token check got no answer from the scheduler)"
    # a probe that timed out is no verdict: a busy scheduler answers the check only after its batch
    return None


def verdict_for(
    st: ServiceStatus,
    scrapes: Sequence[EngineScrape],
    memory: ProgressMemory | None,
    *,
    entries: Sequence[JournalEntry] = (),
    ours: int = 0,
    canary_timed_out_s: float | None = None,
    stall_after_s: float = STALL_AFTER_S,
    now: float | None = None,
) -> ServingVerdict:
    """Judge each scrape in turn against the memory; the last verdict, its ranks named when stalled."""
    key = engine_key(st)
    taken = st.taken_at if now is None else now
    if key is None:
        empty = ProgressMemory(engine_key="", state=UNKNOWN, since=taken)
        return ServingVerdict(state=UNKNOWN, since=taken, last_progress_at=None, pending=Pending(),
                              reason=st.unreachable or "no unit running", memory=empty)
    moved_at, log_running, log_waiting = log_progress(entries)
    was_ready = memory is not None and memory.engine_key == key and memory.state != UNKNOWN
    ready = (st.health is not None and st.health.status == "ready") or was_ready
    failed = health_failure(st) if was_ready else None
    extra = {"ours": ours, "log_moved_at": moved_at, "ready": ready, "health_failed": failed}
    readings = [reading_from_scrape(s, taken_at=s.taken_at, engine=st.engine, **extra) for s in scrapes]
    if not readings:
        readings = [reading_from_scrape(None, taken_at=taken, engine=st.engine, running=log_running,
                                        waiting=log_waiting, **extra)]  # fmt: skip
    if canary_timed_out_s is not None:
        readings[-1] = dataclasses.replace(readings[-1], canary_timed_out_s=canary_timed_out_s)
    verdict = None
    for reading in readings:
        verdict = judge(memory, reading, engine_key=key, stall_after_s=stall_after_s)
        memory = verdict.memory
    assert verdict is not None
    if verdict.state == STALLED:
        names, words = rank_words(service_gpus(st.gpus))
        verdict = _with_ranks(verdict, names, words)
    return verdict


def _with_ranks(verdict: ServingVerdict, names: tuple[str, ...], words: str) -> ServingVerdict:
    return dataclasses.replace(verdict, ranks=names, ranks_words=words)


class MemoryFile:
    """The one-shot status's memory: `host/service` -> the last verdict's memory, in the state dir."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / MEMORY_FILE
        self._doc: dict[str, object] | None = None

    def _load(self) -> dict[str, object]:
        if self._doc is None:
            try:
                doc = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                doc = {}
            self._doc = doc if isinstance(doc, dict) else {}
        return self._doc

    def get(self, host: str, service: str) -> ProgressMemory | None:
        return ProgressMemory.from_json(self._load().get(f"{host}/{service}"))

    def put(self, host: str, service: str, memory: ProgressMemory) -> None:
        self._load()[f"{host}/{service}"] = memory.to_json()

    def save(self) -> None:
        """Write atomically (a status killed mid-write leaves the old file); a failure only costs memory."""
        if self._doc is None:
            return
        with contextlib.suppress(OSError):
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".progress-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self._doc, out)
            os.replace(tmp, self.path)


def serving_line(verdict: ServingVerdict | None) -> str:
    """The plain `status` line: `serving: STALLED: no progress for 24 s ...; GPU 3 idle at 0% while ...`."""
    if verdict is None:
        return "serving: -"
    return f"serving: {verdict.words()}"


async def status_verdict(host: Host, service: ServiceConfig, st: ServiceStatus, scrapes: Sequence[EngineScrape],
                         memories: MemoryFile | None) -> ServingVerdict:
    """A one-shot status's verdict: the journal's tail read, judged against the state dir's memory."""
    memory = memories.get(st.host, st.service) if memories else None
    entries = await journal_tail(host, st.active_unit) if st.active_unit else []
    verdict = verdict_for(st, scrapes, memory, entries=entries, stall_after_s=service_stall_after(service))
    if memories is not None:
        memories.put(st.host, st.service, verdict.memory)
    return await keep_stall_evidence(host, service, verdict, st.active_unit)


async def keep_stall_evidence(host: Host, service: ServiceConfig, verdict: ServingVerdict,
                              unit: str | None) -> ServingVerdict:
    """A stalled verdict with its evidence (ops/evidence), collected once per stall: a restart would
    destroy the stacks, RAS's view and the GPUs' clocks. The stall's start is its key, so the next
    reading of the same stall finds the same folder. Evidence that cannot be had leaves the verdict."""
    if verdict.state != STALLED or verdict.evidence:
        return verdict
    from console.ops.evidence import collect_evidence

    with contextlib.suppress(Exception):
        evidence = await collect_evidence(host, service, verdict.reason, kind="stalled", unit=unit,
                                          key=f"stall:{unit}:{verdict.since:.0f}", since=verdict.since)
        return dataclasses.replace(verdict, evidence=str(evidence.path))
    return verdict


def service_stall_after(service: ServiceConfig) -> float:
    return service.stall_after_s or STALL_AFTER_S


def name_ranks(verdict: ServingVerdict, snapshot: GpuSnapshot | None) -> ServingVerdict:
    """A stalled verdict with the ranks that differ named from a GPU snapshot (others as they are)."""
    if verdict.state != STALLED or snapshot is None:
        return verdict
    names, words = rank_words(service_gpus(snapshot))
    return _with_ranks(verdict, names, words)


class ServingWatch:
    """One service's progress over time, in memory (the open console, the watch daemon), with its canary.

    The canary goes to a ready service that has had nothing pending for `canary_every_s`: one streamed
    one-token request (hosts/endpoints/canary.py); no first token within `canary_timeout_s` is a stall.
    While it is in flight it counts as our own request pending. `canary = false` turns it off.
    """

    def __init__(self, service: ServiceConfig, *, clock: Callable[[], float] | None = None) -> None:
        import time

        self.service = service
        self.clock = clock or time.time
        self.memory: ProgressMemory | None = None
        self.verdict: ServingVerdict | None = None
        self.entries: deque[JournalEntry] = deque(maxlen=BATCH_LINES_KEPT)
        self.idle_since: float | None = None
        self.ours = 0
        self.canary_task: asyncio.Task[None] | None = None
        self.canary_timed_out_s: float | None = None
        self.canaries_sent = 0

    def journal_entry(self, entry: JournalEntry) -> None:
        """A journal entry of the service's running unit, as it is followed: batch and stats lines kept."""
        if parse_batch_line(entry.message) is not None:
            self.entries.append(entry)

    def observe(self, st: ServiceStatus, scrapes: Sequence[EngineScrape], probe: object = None) -> ServingVerdict:
        """Judge this reading; start a canary when one is due."""
        timed_out, self.canary_timed_out_s = self.canary_timed_out_s, None
        if self.memory is not None and self.memory.engine_key != engine_key(st):
            self.entries.clear()
        verdict = verdict_for(st, scrapes, self.memory, entries=list(self.entries), ours=self.ours,
                              canary_timed_out_s=timed_out, stall_after_s=service_stall_after(self.service))
        self.memory, self.verdict = verdict.memory, verdict
        self._canary(st, verdict, probe)
        return verdict

    def _canary(self, st: ServiceStatus, verdict: ServingVerdict, probe: object) -> None:
        from console.domain.progress import IDLE
        from console.hosts.endpoints import HttpHealthProbe

        now = self.clock()
        if verdict.state != IDLE or not self.service.canary or not isinstance(probe, HttpHealthProbe):
            self.idle_since = None
            return
        self.idle_since = self.idle_since or now
        busy = self.canary_task is not None and not self.canary_task.done()
        if busy or now - self.idle_since < self.service.canary_every_s:
            return
        self.canary_task = asyncio.create_task(self._send(probe), name=f"canary-{self.service.name}")

    async def _send(self, probe: object) -> None:
        from console.hosts.endpoints import send_canary

        self.ours += 1
        self.canaries_sent += 1
        try:
            result = await send_canary(probe, self.service.canary_timeout_s)  # type: ignore[arg-type]
        finally:
            self.ours -= 1
            self.idle_since = None  # the next one is due canary_every_s after this one
        if result.timed_out:
            self.canary_timed_out_s = self.service.canary_timeout_s

    def close(self) -> None:
        if self.canary_task is not None:
            self.canary_task.cancel()
