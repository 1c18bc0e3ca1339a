"""`serve-console watch`: the unattended daemon that turns what the console sees into alerts.

It observes every host (console/ops/watch/observe.py; with `[fleet]`, through Prometheus first and over SSH
only where needed, fleet_watch.py), has the rules judge each host whenever something
changed (console/domain/alerts/), writes each transition to the state file and queues it for every
destination (store.py), and delivers the queues (delivery.py). When it starts it reloads the alerts that
were firing, so its own restart continues each incident instead of raising it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from console.config import ConsoleConfig, ServiceConfig
from console.domain.alerts import (
    CRASH_LOOP,
    ENGINE_FAILED,
    FIRING,
    HOST_UNREACHABLE,
    KV_CACHE_HIGH,
    RANK_DEAD,
    REQUESTS_WAITING,
    RESOLVED,
    START_HUNG,
    UPDATED,
    Alert,
    AlertBook,
    HostWatch,
    ServiceWatch,
    Transition,
    Verdict,
)
from console.hosts.base import Host
from console.hosts.state_dir import state_dir
from console.ops.audit import AuditLog
from console.ops.evidence import collect_evidence, incident_of
from console.ops.fleet import PrometheusFleet
from console.ops.state_db import AuditError
from console.ops.watch.bundles import complete_later, freeze
from console.ops.watch.delivery import Deliverer, Sink
from console.ops.watch.fleet_watch import FleetWatch
from console.ops.watch.observe import HostObserver, RankSource
from console.ops.watch.outbox import Outbox
from console.ops.watch.recording import open_recordings, tick_recordings
from console.ops.watch.store import AlertStore

#: The alerts Prometheus alone judges with [fleet]: they need no SSH to fire or resolve.
PROMETHEUS_JUDGES = frozenset({HOST_UNREACHABLE, KV_CACHE_HIGH, REQUESTS_WAITING})
#: The incidents whose evidence is collected when they fire (ops/evidence), its folder then in the
#: alert's `evidence` annotation; `ServeStalled` is the stall verdict's alert.
EVIDENCE_ALERTS = frozenset({ENGINE_FAILED, CRASH_LOOP, START_HUNG, RANK_DEAD, "ServeStalled"})


def transition_line(transition: Transition) -> str:
    """One log line: `FIRING ServeCrashLoop demo/k26 sim-k26@tp4ep2.service: ...`."""
    alert = transition.alert
    where = "/".join(v for v in (alert.label("host"), alert.label("service")) if v)
    unit = alert.label("unit")
    return (f"{transition.kind.upper()} {alert.label('alertname')} {where}" + (f" {unit}" if unit else "")
            + f": {alert.annotation('summary')}")


class WatchDaemon:
    """Watches hosts and raises, updates and resolves alerts.

    Args:
        hosts: The hosts to watch, built by the caller (real, simulated, or fixed-data for tests).
        config: The loaded config (its `[watch]` table; every host it names, watched or not).
        store: The state file's alerts and outbox.
        sinks: Where alerts go.
        say: Where one-line reports go (stderr, i.e. the journal when run as a systemd service).
        on_transition: Called with each transition (`watch --json` prints them).
        audit: The audit log (the layout a single-unit service runs).
        rank_source: Per-rank liveness of services over several hosts, where one is supplied.
        clock: POSIX seconds: the wall clock, for the timestamps alerts carry.
        monotonic: Seconds that never step. The rules' windows and the re-sends are timed on the wall clock
            as it read at the start plus the monotonic time since, so a step of the wall clock
            (NTP, a restored VM, `date -s`) neither resolves an alert nor ends a crash loop's window.
    """

    def __init__(self, hosts: Sequence[Host], config: ConsoleConfig, store: AlertStore, sinks: Sequence[Sink], *,
                 say: Callable[[str], None], on_transition: Callable[[Transition], None] | None = None,
                 audit: AuditLog | None = None, rank_source: RankSource | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 fleet_at: Callable[[], float | None] = lambda: None, state_root: Path | None = None) -> None:
        self.config = config
        self.watch = config.watch
        self.store = store
        self.sinks = list(sinks)
        self.say = say
        self.on_transition = on_transition
        self.wall = clock
        anchor_wall, anchor_mono = clock(), monotonic()

        def steady() -> float:
            return anchor_wall + (monotonic() - anchor_mono)

        self.clock = clock = steady
        """The rules' clock: steady, on the wall clock's scale as it read at the start."""
        thresholds = self.watch.thresholds
        self.started_at = anchor_wall
        self.book = AlertBook(thresholds)
        self.book.restore(store.firing())
        self.hosts = {h.name: h for h in hosts}
        self.host_watches = {h.name: HostWatch(h.name, thresholds, self.started_at) for h in hosts}
        self.service_watches: dict[str, dict[str, ServiceWatch]] = {
            h.name: {s.name: ServiceWatch(h.name, s.name, s.all_units(), thresholds, self.started_at)
                     for s in h.config.services}
            for h in hosts
        }
        self.observers = [
            HostObserver(h, self.host_watches[h.name], self.service_watches[h.name],
                         interval_s=self.watch.interval_s, changed=self._changed_callback(h.name), audit=audit,
                         rank_source=rank_source, clock=clock, from_prometheus=config.fleet is not None)
            for h in hosts
        ]
        self.fleet: FleetWatch | None = None
        """With [fleet]: every host from Prometheus, and each host's SSH watch only while it is needed."""
        if config.fleet is not None:
            self.fleet = FleetWatch(
                PrometheusFleet(config.fleet, config.hosts), self.host_watches, self.service_watches,
                {o.host.name: o for o in self.observers}, changed=self.evaluate,
                firing=lambda host: any(a.label("host") == host and a.label("alertname") not in PROMETHEUS_JUDGES
                                        for a in self.book.firing.values()),
                interval_s=self.watch.interval_s, say=say, clock=clock, at=fleet_at)
        self.outbox = Outbox(store, say)
        self.deliverer = Deliverer(self.outbox, self.sinks, resend_s=self.watch.resend_s,
                                   firing=lambda: list(self.book.firing.values()), say=say, clock=self.wall,
                                   monotonic=monotonic)
        self._due: dict[str, asyncio.TimerHandle] = {}
        self._collecting: set[asyncio.Task[None]] = set()
        self.state_root = state_root
        self.recordings = open_recordings(hosts, state_root, say)
        """Each host's rolling record (docs/recorder.md), where its `record_cap_mib` is not 0."""
        for observer in self.observers:
            observer.recording = self.recordings.get(observer.host.name)

    def _changed_callback(self, host: str) -> Callable[[], None]:
        return lambda: self.evaluate(host)

    async def run(self) -> None:
        """Watch until cancelled."""
        self.outbox.report_damage()
        self._forget_unknown()
        names = ", ".join(self.hosts) or "no hosts"
        self.say(f"watching {names}; {len(self.book.firing)} alerts firing from before; "
                 f"sending to {', '.join(s.name for s in self.sinks) or 'no destination (the state file only)'}")
        tasks = [asyncio.create_task(self.deliverer.run(), name="watch-delivery")]
        if self.recordings:
            tasks.append(asyncio.create_task(tick_recordings(self.recordings), name="watch-record"))
        if self.fleet is not None:
            tasks.append(asyncio.create_task(self.fleet.run(), name="watch-fleet"))
        else:
            tasks += [asyncio.create_task(o.run(), name=f"watch-{o.host.name}") for o in self.observers]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for handle in self._due.values():
                handle.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks, return_exceptions=True)

    def _forget_unknown(self) -> None:
        """Firing alerts of hosts or services the config no longer names resolve: nothing watches them."""
        known = {(h.name, "") for h in self.config.hosts} | {(h.name, s.name) for h in self.config.hosts
                                                               for s in h.services}
        gone = [a for a in self.book.firing.values() if (a.label("host"), a.label("service")) not in known]
        for alert in gone:
            del self.book.firing[alert.fingerprint]
        now = self.wall()
        self._commit([Transition(RESOLVED, replace(a, ends_at=max(now, a.starts_at))) for a in gone])

    def verdicts(self, host: str, now: float) -> list[Verdict]:
        """Every rule's judgement of one host now."""
        out = self.host_watches[host].verdicts(now, self.book.active_for(host))
        for name, watch in self.service_watches[host].items():
            out += watch.verdicts(now, self.book.active_for(host, name))
        return out

    def evaluate(self, host: str) -> list[Transition]:
        """Judge one host again; record, queue and report what changed."""
        now = self.clock()
        transitions = self.book.apply(self.verdicts(host, now), self.wall())  # judged steady, stamped on the wall
        self._record_unrecorded()
        self._commit(transitions)
        self._schedule(host, now)
        return transitions

    def _record_unrecorded(self) -> None:
        """Alerts that fired while the state file could not be written get their rows once it can (their
        deliveries already left from memory)."""
        unrecorded = [a for a in self.book.firing.values() if a.id is None] if self.outbox.fault else []
        for alert in unrecorded:
            try:
                self.book.stored(self.store.record(Transition(FIRING, alert)))
            except AuditError:
                return
        if unrecorded:
            self.outbox.store_ok()

    def _commit(self, transitions: Sequence[Transition]) -> None:
        sinks = [s.name for s in self.sinks]
        for transition in transitions:
            try:
                stored = self.store.record(transition)
            except AuditError as exc:  # a full disk: the alert still leaves, from memory
                self.outbox.store_fault(exc)
                stored = transition.alert
            if transition.kind == UPDATED:
                self.book.stored(stored)
                continue  # Alertmanager hears new text with the next re-send; the webhook hears transitions
            if transition.kind == FIRING:
                self.book.stored(stored)
                if stored.label("alertname") in EVIDENCE_ALERTS:
                    self._collect(stored)
            transition = Transition(transition.kind, stored)
            if (recording := self.recordings.get(stored.label("host"))) is not None:
                recording.alert(transition.kind, stored)
            try:
                if stored.id is None:
                    raise AuditError(self.outbox.fault or f"state file {self.store.path}: not recorded")
                dropped = self.store.enqueue(sinks, transition.kind, stored)
                self.outbox.store_ok()
            except AuditError as exc:
                self.outbox.store_fault(exc)
                dropped = self.outbox.hold(sinks, transition.kind, stored)
            for sink in dropped:
                self.say(f"{sink}: queue full ({self.store.queue_max}); dropped its oldest delivery")
            self.say(transition_line(transition))
            if self.on_transition is not None:
                self.on_transition(transition)
        if transitions:
            self.deliverer.wake()

    def _collect(self, alert: Alert) -> None:
        """Collect the incident's evidence beside the judging (never in its way), then annotate the alert."""
        host = self.hosts.get(alert.label("host"))
        service = next((s for s in host.config.services if s.name == alert.label("service")), None) if host else None
        if host is None or service is None:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._evidence(alert, host, service))
        except RuntimeError:  # no running loop: a test judging by hand
            return
        self._collecting.add(task)
        task.add_done_callback(self._collecting.discard)

    async def _evidence(self, alert: Alert, host: Host, service: ServiceConfig) -> None:
        name = alert.label("alertname")
        try:
            # The incident as a stop or restart of it would name it, so the faces share one folder.
            incident = await incident_of(host, service)
            key, since, unit = ((incident.key, incident.since, incident.unit) if incident is not None
                                else (f"alert:{alert.fingerprint}:{alert.starts_at}", alert.starts_at,
                                      alert.label("unit") or None))
            evidence = await collect_evidence(host, service, alert.annotation("summary"), kind=name, key=key,
                                              since=since, trigger="watch", unit=unit)
        except Exception as exc:  # evidence that cannot be had is said; the alert stands without it
            self.say(f"{name} {host.name}/{service.name}: no evidence: {exc}")
            evidence = None
        annotations = []
        if evidence is not None:
            self.say(f"{name} {host.name}/{service.name}: {evidence.words()}")
            annotations.append(("evidence", str(evidence.path)))
        bundle = await self._bundle(alert, host, service, str(evidence.path) if evidence is not None else None)
        if bundle is not None:
            annotations.append(("bundle", str(bundle)))
        if annotations:
            self.book.annotate(alert.fingerprint, tuple(annotations))
            self.evaluate(host.name)
            self.deliverer.resend_soon()

    async def _bundle(self, alert: Alert, host: Host, service: ServiceConfig, evidence: str | None) -> Path | None:
        """The incident's bundle from the host's record, now; written again whole after `bundle_after_s`."""
        recording = self.recordings.get(host.name)
        if recording is None:
            return None
        name, root = alert.label("alertname"), self.state_root or state_dir()
        try:
            path = await freeze(recording, root, host, service, alert, evidence, clock=self.wall)
        except (OSError, TimeoutError) as exc:
            self.say(f"{name} {host.name}/{service.name}: no bundle: {exc}")
            return None
        self.say(f"{name} {host.name}/{service.name}: bundle {path}")
        task = asyncio.get_running_loop().create_task(
            complete_later(recording, root, host, service, alert, evidence, self.say, clock=self.wall))
        self._collecting.add(task)
        task.add_done_callback(self._collecting.discard)
        return path

    def _schedule(self, host: str, now: float) -> None:
        """Judge again when a failure that waits for its cause comes due."""
        dues = [u.failure_due for w in self.service_watches[host].values() for u in w.units.values()
                if u.failure_due is not None and u.failure_due > now]
        if not dues:
            return
        delay = min(dues) - now + 0.01
        old = self._due.pop(host, None)
        if old is not None:
            old.cancel()
        with contextlib.suppress(RuntimeError):  # no running loop: a test judging by hand
            self._due[host] = asyncio.get_running_loop().call_later(delay, self.evaluate, host)

    async def close(self) -> None:
        for task in list(self._collecting):
            task.cancel()
        await asyncio.gather(*self._collecting, return_exceptions=True)
        for recording in self.recordings.values():
            recording.close()
        if self.fleet is not None:
            await self.fleet.close()
        await self.deliverer.close()
