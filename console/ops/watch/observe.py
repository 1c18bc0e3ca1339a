"""What the watch daemon sees of one host: its units' journals live, and a reading every `interval_s`.

The journal of each unit that runs (or just died) is followed through the host's journal hub, so each
entry is triaged once, by the same triager and phase tracker the TUI uses, and a fatal line reaches the
rules at once. Every `interval_s` the unit states (systemd's NRestarts among them), `/health`, the
engine's gauges and, from dcgm-exporter, the GPUs' Xids are read. A host that cannot be read is only
marked so; its units' alerts stay as they are until it can be read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from console.config import DROP_IN, ENV_FILE, ServiceConfig
from console.domain.alerts import HostWatch, RankLiveness, ServiceWatch, ServingState
from console.domain.triage import OPEN, as_engine_error, decisive, tier_of, xid_findings
from console.domain.values import Finding, FindingClass, Phase, UnitState
from console.hosts.base import Host
from console.hosts.endpoints import MetricsUnavailable, metrics_reader
from console.hosts.journal_hub import ReadEntry
from console.ops.audit import AuditLog
from console.ops.serving import ServingWatch, name_ranks
from console.ops.state_db import AuditError
from console.ops.status import ServiceStatus
from console.ops.watch.recording import HostRecording

#: Entries read back when the daemon begins to follow a unit: a start's first lines, and the restarts
#: inside the crash loop's window, which the daemon did not see live (it just started, or the unit did).
LOOKBACK_ENTRIES = 2000
#: Journal streams per host at most (each is an SSH channel; the console's own cap is 6 per connection).
MAX_FOLLOWED = 4
#: Findings of one start kept for its decisive finding.
START_FINDINGS = 256
READ_TIMEOUT_S = 10.0
RESUME_AFTER_S = 1.0
#: Seconds either side of a switch in the audit log within which a start is the console's own (the host's
#: journal and this machine's clock may differ a little).
CONSOLE_START_SLACK_S = 2.0

#: Per-rank liveness of a service over several hosts, where a status reports it (None: it does not).
RankSource = Callable[[Host, ServiceConfig], Awaitable[Sequence[RankLiveness] | None]]


class _Follower:
    """One unit's journal as the daemon reads it: the current start's findings and the stream's task."""

    def __init__(self, cursor: str | None = None) -> None:
        self.findings: deque[Finding] = deque(maxlen=START_FINDINGS)
        self.cursor = cursor
        self.task: asyncio.Task[None] | None = None
        self.read = 0
        """Entries read; a reading that finds no more read since the last one ends a replay."""
        self.read_at_poll = -1


def _follow_order(state: UnitState, now: float, window_s: float) -> tuple[int, float]:
    """Which units to follow first: running, waiting for a restart, failed within the crash loop's window,
    then the rest, most recently changed first (a stopped unit is followed too while there is room, so its
    next start is read from its first line, not from the next reading)."""
    if state.is_running:
        rank = 0
    elif state.sub == "auto-restart" or (state.active == "failed" and now - (state.since or now) < window_s):
        rank = 1
    else:
        rank = 2
    return rank, -(state.since or 0.0)


class HostObserver:
    """Feeds one host's observations to its rules, and says when something changed.

    Args:
        host: The host.
        host_watch: Its host rules.
        services: Its services' rules by service name.
        interval_s: Seconds between readings.
        changed: Called when the rules should judge this host again.
        audit: The audit log (the layout a single-unit service runs); None: unknown.
        rank_source: Per-rank liveness of multi-host services, where one is supplied.
        clock: POSIX seconds.
    """

    def __init__(self, host: Host, host_watch: HostWatch, services: dict[str, ServiceWatch], *, interval_s: float,
                 changed: Callable[[], None], audit: AuditLog | None = None, rank_source: RankSource | None = None,
                 clock: Callable[[], float] = time.time, from_prometheus: bool = False) -> None:
        self.host = host
        self.host_watch = host_watch
        self.services = services
        self.interval_s = interval_s
        self.changed = changed
        self.audit = audit
        self.rank_source = rank_source
        self.clock = clock
        self.followers: dict[str, _Follower] = {}
        self.cursors: dict[str, str] = {}
        """Where the daemon stopped reading a unit it let go of (one per unit of the host, at most)."""
        self.from_prometheus = from_prometheus
        """With [fleet]: the host's age and its engines' gauges come from Prometheus, not from here."""
        self.serving: dict[str, ServingWatch] = {}
        """Each service's progress, judged every reading from its /metrics and its followed journal."""
        self.recording: HostRecording | None = None
        """The host's rolling record (docs/recorder.md), where the daemon keeps one."""

    async def run(self) -> None:
        """Read the host every `interval_s` until cancelled."""
        try:
            while True:
                started = time.monotonic()
                await self.poll()
                self.changed()
                await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            for follower in self.followers.values():
                if follower.task is not None:
                    follower.task.cancel()
            for serving in self.serving.values():
                serving.close()

    async def poll(self) -> None:
        """One reading of every service (and, with dcgm-exporter, the GPUs)."""
        reached = False
        errors = []
        for cfg in self.host.config.services:
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    await self._service(cfg)
                reached = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a host that is down, a dropped connection, a command that hung
                errors.append(str(exc) or type(exc).__name__)
        if not self.host.config.services:  # only a node of others' services: read through what it serves
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    await self._node_units()
                reached = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                errors.append(str(exc) or type(exc).__name__)
        if self.from_prometheus:
            pass
        elif reached:
            self.host_watch.reached(self.clock())
        else:
            self.host_watch.missed("; ".join(errors)[:300] or "no reading")
        await self._gpus()

    async def _node_units(self) -> None:
        """The units this host runs as a node of another host's service (their rules are the head's)."""
        units = [u for cfg in self.host.config.node_of for u in cfg.all_units()]
        await asyncio.gather(*(self.host.services.state(u) for u in dict.fromkeys(units)))

    async def _service(self, cfg: ServiceConfig) -> None:
        watch = self.services[cfg.name]
        states = await asyncio.gather(*(self.host.services.state(u) for u in cfg.all_units()))
        now = self.clock()
        for state in states:
            watch.units[state.unit].observe(state, now)
        if self.recording is not None:
            self.recording.states(self.host.name, cfg.name, states)
        self._layouts(cfg, watch, states)
        self._follow(cfg, sorted(states, key=lambda s: _follow_order(s, now, watch.t.crash_loop_window_s)))
        running = any(s.is_running for s in states)
        probe = self.host.probes.get(cfg.name)
        ready, sample = False, None
        if probe is not None:
            try:
                sample = await probe.probe()
            except Exception as exc:  # unreadable: as good as down for a service that should serve
                watch.health_down(self.clock(), f"unreadable: {str(exc)[:200] or type(exc).__name__}")
            else:
                ready = sample.status == "ready"
                if self.recording is not None:
                    self.recording.health(cfg.name, sample)
                why = sample.status + (f", {sample.error[:200]}" if sample.error else "")
                watch.observe_health(ready, self.clock(), why)  # the rules' clock: steady
        if not self.from_prometheus:
            scrape = await self._gauges(cfg, watch, probe if running else None, ready=ready)
            await self._serving(cfg, watch, states, sample, scrape, probe)
        if self.rank_source is not None:
            ranks = await self.rank_source(self.host, cfg)
            if ranks is not None:
                watch.observe_ranks(ranks, self.clock())

    async def _gauges(self, cfg: ServiceConfig, watch: ServiceWatch, probe: object, *, ready: bool):
        """The engine's KV usage and waiting requests from its /metrics (None while it is not ready); the
        scrape itself while a unit runs, for the progress verdict (a stalled SGLang answers /health 503)."""
        kv = waiting = scrape = None
        reader = metrics_reader(probe, cfg.engine) if probe is not None else None  # type: ignore[arg-type]
        if reader is not None:
            with contextlib.suppress(MetricsUnavailable):
                scrape = await reader.scrape()
                if self.recording is not None:
                    self.recording.metrics(cfg.name, scrape)
                if ready:
                    kv, waiting = scrape.kv_cache_usage, scrape.waiting_requests
        watch.observe_engine(kv, waiting, self.clock())
        return scrape

    async def _serving(self, cfg: ServiceConfig, watch: ServiceWatch, states: Sequence[UnitState], sample: object,
                       scrape: object, probe: object) -> None:
        """The progress verdict of this reading (ServeStalled), the ranks named from the GPUs when stalled."""
        serving = self.serving.get(cfg.name)
        if serving is None:
            serving = self.serving[cfg.name] = ServingWatch(cfg, clock=self.clock)
        unit = next((s for s in states if s.is_running), None)
        if unit is None:
            watch.observe_serving(None)
            return
        st = ServiceStatus(host=self.host.name, service=cfg.name, engine=cfg.engine.value, units=tuple(states),
                           active_unit=unit.unit, active_layout=watch.layouts.get(unit.unit), health=sample,  # type: ignore[arg-type]
                           gpus=None, taken_at=self.clock())
        verdict = serving.observe(st, [scrape] if scrape is not None else [], probe)  # type: ignore[list-item]
        if verdict.state == "stalled":
            with contextlib.suppress(Exception):
                async with asyncio.timeout(READ_TIMEOUT_S):
                    verdict = name_ranks(verdict, await self.host.gpus.sample())
        state = ServingState(verdict.state, unit.unit, verdict.since, verdict.reason, verdict.ranks_words or "",
                             verdict.evidence or "")
        watch.observe_serving(state)
        if self.recording is not None:
            self.recording.serving(cfg.name, state)

    def _console_starts(self, cfg: ServiceConfig, watch: ServiceWatch) -> None:
        """The console's own switches of this service within the crash loop's window, from the audit log:
        a start of one of its units during one is the operator's, never counted as a restart."""
        if self.audit is None:
            return
        now, window = time.time(), watch.t.crash_loop_window_s  # the audit log's clock: the wall's
        try:
            entries = self.audit.entries(host=self.host.name, limit=64)
        except AuditError:
            return
        spans = tuple((e.started_at - CONSOLE_START_SLACK_S, (e.finished_at or now) + CONSOLE_START_SLACK_S)
                      for e in entries if e.service == cfg.name and (e.finished_at or now) >= now - window)
        for unit in watch.units.values():
            unit.console_starts = spans

    def _layouts(self, cfg: ServiceConfig, watch: ServiceWatch, states: Sequence[UnitState]) -> None:
        self._console_starts(cfg, watch)
        if cfg.mapping in (ENV_FILE, DROP_IN):
            layout = self.audit.last_started_layout(self.host.name, cfg.name) if self.audit else None
            watch.layouts = {u: layout for u in cfg.all_units() if layout}
        else:
            watch.layouts = {cfg.unit_for(lc): lc.name for lc in cfg.layouts}

    async def _gpus(self) -> None:
        if self.recording is not None and self.host.config.gpus not in ("dcgm", "none"):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(READ_TIMEOUT_S):
                    self.recording.gpus(await self.host.gpus.sample())
        if self.host.config.gpus != "dcgm":  # the only GPU source that reports Xids
            self.host_watch.observe_gpus(())
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(READ_TIMEOUT_S):
                snapshot = await self.host.gpus.sample()
            if self.recording is not None:
                self.recording.gpus(snapshot)
            if snapshot.error is None:
                self.host_watch.observe_gpus(xid_findings(snapshot))

    # -- the journals -------------------------------------------------------------------------------
    def _follow(self, cfg: ServiceConfig, ordered: Sequence[UnitState]) -> None:
        """Follow a service's units in the order given, as many as the host's MAX_FOLLOWED leaves room for;
        let go of the others (a unit that falls out of the first places gives its stream to one that rose)."""
        mine = set(cfg.all_units())
        for unit in mine & self.followers.keys():  # a history read back whole: the rules may judge it
            follower, watch = self.followers[unit], self.services[cfg.name].units[unit]
            if watch.replaying and follower.read == follower.read_at_poll:
                watch.replaying = False
            follower.read_at_poll = follower.read
        others = sum(1 for unit, f in self.followers.items() if unit not in mine and f.task and not f.task.done())
        keep = [s.unit for s in ordered][: max(0, MAX_FOLLOWED - others)]
        for unit in [u for u in mine if u in self.followers and u not in keep]:
            follower = self.followers.pop(unit)
            if follower.task is not None:
                follower.task.cancel()
            if follower.cursor is not None:
                self.cursors[unit] = follower.cursor  # followed again later: from here, nothing read twice
        for unit in keep:
            if unit not in self.followers:
                self.followers[unit] = _Follower(self.cursors.pop(unit, None))
                if self.followers[unit].cursor is None:  # read back from before: judged once caught up
                    self.services[cfg.name].units[unit].replaying = True
            follower = self.followers[unit]
            if follower.task is None or follower.task.done():
                follower.task = asyncio.create_task(self._read(cfg, unit, follower), name=f"watch-journal-{unit}")

    async def _read(self, cfg: ServiceConfig, unit: str, follower: _Follower) -> None:
        """Follow one unit's journal, resuming after the last entry read when the stream breaks."""
        while True:
            try:
                stream = self.host.journals.subscribe(
                    unit, engine=cfg.engine, after_cursor=follower.cursor,
                    lines=None if follower.cursor else LOOKBACK_ENTRIES)
                async with contextlib.aclosing(stream):
                    async for read in stream:
                        follower.cursor = read.entry.cursor
                        follower.read += 1
                        if self.on_entry(cfg, unit, follower, read) and not self._replaying(cfg):
                            self.changed()
            except asyncio.CancelledError:
                raise
            except Exception:  # a dropped SSH channel: the hub's stream ends; resume after the cursor
                pass
            await asyncio.sleep(RESUME_AFTER_S)

    def _replaying(self, cfg: ServiceConfig) -> bool:
        return any(u.replaying for u in self.services[cfg.name].units.values())

    def on_entry(self, cfg: ServiceConfig, unit_name: str, follower: _Follower, read: ReadEntry) -> bool:
        """Take one entry's phase and findings; True when the rules should judge again."""
        unit = self.services[cfg.name].units[unit_name]
        if unit.replaying and read.entry.ts is not None and read.entry.ts >= self.host_watch.watching_since:
            unit.replaying = False  # caught up: this entry was logged while the daemon watched
        if cfg.name in self.serving:
            self.serving[cfg.name].journal_entry(read.entry)
        if self.recording is not None:
            self.recording.journal(self.host.name, cfg.name, unit_name, read.entry)
        by_systemd = read.entry.source == "systemd"
        changed = False
        if read.phase is not None:
            if read.phase.phase is Phase.STARTING and by_systemd:
                follower.findings.clear()  # a new start: its failure is its own
            unit.phase_seen(read.phase, by_systemd=by_systemd)
            changed = True
        fatal = False
        for finding in read.findings:
            follower.findings.append(finding)
            if finding.cls is FindingClass.GPU_XID:
                self.host_watch.journal_xid(finding)
                changed = True
            fatal = fatal or finding.fatal
        if fatal:
            cause = decisive(list(follower.findings))
            if cause is not None and cause.cls is FindingClass.UNIT_FAILED:
                unexplained = [f for f in follower.findings if f.cls is FindingClass.TRACEBACK]
                cause = as_engine_error(unexplained[-1]) if unexplained else cause  # the exception that ended it
            if cause is not None:
                unit.fatal(cause, read.entry.ts, root=tier_of(cause.cls) < OPEN)
                changed = True
        return changed
