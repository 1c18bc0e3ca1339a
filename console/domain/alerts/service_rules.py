"""The rules of one service on one host: failed, crash-looping, hung, flapping, overloaded, a rank down.

Each rule judges one scope (an alert name on this host and service) from what the daemon has observed,
and says which conditions hold. An alert resolves only on evidence that its condition ended: a start
that became ready, a quiet window watched whole, a reading below the threshold. While the daemon has
not seen enough to judge (it just started, and its alerts came back from the state file), the rule
keeps what fires as it is, so a restart of the daemon never resolves, nor raises a second time, an
incident that still holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.domain.alerts.alert import Condition, Scope, Verdict
from console.domain.alerts.card import card_annotations, card_description
from console.domain.alerts.thresholds import (
    CRASH_LOOP,
    ENGINE_FAILED,
    HEALTH_DOWN,
    HEALTH_FLAPPING,
    KV_CACHE_HIGH,
    RANK_DEAD,
    REQUESTS_WAITING,
    STALLED,
    START_HUNG,
    AlertThresholds,
)
from console.domain.alerts.unit_watch import UnitWatch
from console.domain.alerts.windows import Changes, Holding

#: (alert name, unit) of the alerts that fire now for this service; the unit is "" for service-wide ones.
Active = frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class RankLiveness:
    """One rank of a service over several hosts, as a multi-node status reports it (the extension point:
    the daemon's `rank_source` supplies these; without one, the rank rule stays silent).

    Attributes:
        rank: Its name (`node 1`, `TP8`, `DP1`).
        host: The host it runs on.
        unit: The unit that runs it there ("" when unknown).
        alive: False when it is dead or wedged.
        detail: Why it is not alive (`no heartbeat for 75 s`, `NCCL RAS: missing`).
    """

    rank: str
    host: str
    unit: str = ""
    alive: bool = True
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ServingState:
    """The progress verdict on a running service (console/domain/progress), as the rules need it.

    Attributes:
        state: `serving`, `idle`, `stalled` or `unknown`.
        unit: The unit that runs.
        since: When the state began (a stall: when progress was last seen).
        reason: The verdict's reason, in words.
        ranks: The ranks that differ, in words ("" when not read).
        evidence: The evidence folder's path, where one was collected ("" when none).
    """

    state: str
    unit: str = ""
    since: float | None = None
    reason: str = ""
    ranks: str = ""
    evidence: str = ""


class ServiceWatch:
    """What the daemon knows of one service, and the rules over it.

    Args:
        host: The host's name.
        service: The service's name.
        units: Every unit the service may run.
        thresholds: The rules' numbers.
        watching_since: When the daemon began watching (a quiet window is measured from here at the earliest).
    """

    def __init__(self, host: str, service: str, units: Sequence[str], thresholds: AlertThresholds,
                 watching_since: float) -> None:
        self.host = host
        self.service = service
        self.t = thresholds
        self.watching_since = watching_since
        self.units = {u: UnitWatch(u, thresholds) for u in units}
        self.layouts: dict[str, str] = {}
        """unit -> the layout it runs (set by the daemon from the config and the audit log)."""
        self.health = Changes(thresholds.flapping_window_s)
        self.down_since: float | None = None
        """Since when /health has not answered ready (down, starting or unreadable), if it is so now."""
        self.down_why = ""
        self.health_read = False
        self.kv = Holding(thresholds.kv_usage_for_s)
        self.waiting = Holding(thresholds.waiting_for_s)
        self.engine_read = False
        self.ranks: tuple[RankLiveness, ...] | None = None
        self.serving: ServingState | None = None
        """The last progress verdict; None: not judged (no engine read yet)."""
        self._dead_since: dict[tuple[str, str], float] = {}

    # -- observations -------------------------------------------------------------------------------
    def observe_health(self, ready: bool, ts: float, why: str = "") -> None:
        """A `/health` reading: ready marks the running unit's start ready."""
        self.health.observe(ready, ts)
        if ready:
            self._health_up()
        else:
            self.health_down(ts, why)
        if ready:
            for unit in self.units.values():
                if unit.running and not unit.ready:
                    unit.mark_ready(ts)

    def health_down(self, ts: float, why: str) -> None:
        """/health did not answer ready (`why`: down, its status, or why it could not be read)."""
        self.health_read = True
        self.down_since = ts if self.down_since is None else self.down_since
        self.down_why = why

    def _health_up(self) -> None:
        self.health_read, self.down_since, self.down_why = True, None, ""

    def observe_engine(self, kv_usage: float | None, waiting: float | None, ts: float) -> None:
        """The engine's own gauges (None: not running, or not exported)."""
        self.engine_read = True
        self.kv.observe(kv_usage, self.t.kv_usage_ratio, ts)
        self.waiting.observe(waiting, self.t.waiting_requests, ts)

    def observe_serving(self, serving: ServingState | None) -> None:
        """The progress verdict of this reading (None: no unit runs)."""
        self.serving = serving

    def observe_ranks(self, ranks: Sequence[RankLiveness], ts: float) -> None:
        self.ranks = tuple(ranks)
        dead = {(r.host, r.rank) for r in self.ranks if not r.alive}
        self._dead_since = {k: v for k, v in self._dead_since.items() if k in dead}
        for key in dead:
            self._dead_since.setdefault(key, ts)

    # -- the rules ----------------------------------------------------------------------------------
    def verdicts(self, now: float, active: Active) -> list[Verdict]:
        """Every rule's judgement now (while a unit's history is read back, its unit rules keep what fires)."""
        if any(u.replaying for u in self.units.values()):
            units = [self._kept_all(name, active) for name in (ENGINE_FAILED, CRASH_LOOP, START_HUNG)]
        else:
            units = [self._failed(now, active), self._crash_loop(now, active), self._hung(now, active)]
        out = [*units, self._flapping(now, active), self._down(now, active),
               self._holding(KV_CACHE_HIGH, self.kv, self.t.kv_usage_ratio, active,
                             f"KV cache usage at or above {100 * self.t.kv_usage_ratio:g}%", now, percent=True),
               self._holding(REQUESTS_WAITING, self.waiting, self.t.waiting_requests, active,
                             f"{self.t.waiting_requests:g} or more requests waiting", now)]
        if (ranks := self._ranks(now)) is not None:
            out.append(ranks)
        out.append(self._stalled(active))
        return out

    def _kept_all(self, alertname: str, active: Active) -> Verdict:
        return Verdict(self._scope(alertname), tuple(self._keep(alertname, unit) for name, unit in active
                                                     if name == alertname))

    def _stalled(self, active: Active) -> Verdict:
        """Work pending and no progress for the service's stall_after_s; resolved once tokens move (or the
        engine is gone). Kept while nothing could be judged (the engine not read this time)."""
        serving = self.serving
        firing = any(name == STALLED for name, _ in active)
        if serving is not None and serving.state == "stalled":
            extra = (("ranks", serving.ranks),) if serving.ranks else ()
            if serving.evidence:
                extra += (("evidence", serving.evidence),)
            return Verdict(self._scope(STALLED), (self._condition(
                STALLED, serving.unit, summary=f"{self.service} on {self.host} is stalled: {serving.reason}",
                description=f"{self._where(serving.unit)}: its processes run and its HTTP server may answer 200, "
                            f"but it makes no progress" + (f"; {serving.ranks}" if serving.ranks else ""),
                hint="collect the evidence (stacks, NCCL RAS, GPU clocks) before a restart destroys it, then restart "
                     "every rank together",
                since=serving.since, extra=extra),))
        if firing and serving is not None and serving.state == "unknown" and serving.unit:
            return Verdict(self._scope(STALLED), (self._keep(STALLED, serving.unit),))
        return Verdict(self._scope(STALLED))

    def _scope(self, alertname: str) -> Scope:
        return Scope(alertname, self.host, self.service)

    def _condition(self, alertname: str, unit: str = "", **fields: object) -> Condition:
        return Condition(alertname, self.host, self.service, unit, self.layouts.get(unit, ""), **fields)  # type: ignore[arg-type]

    def _keep(self, alertname: str, unit: str = "") -> Condition:
        return Condition(alertname, self.host, self.service, unit, keep=True)

    def _where(self, unit: str) -> str:
        layout = self.layouts.get(unit)
        return f"{self.service} on {self.host}, {unit}" + (f" ({layout})" if layout else "")

    def _failed(self, now: float, active: Active) -> Verdict:
        ready = [u for u in self.units.values() if u.running and u.ready and u.started_at is not None]
        conditions = []
        for name, unit in self.units.items():
            if unit.failure is not None and unit.failure_since is not None and (
                unit.recovered() or any(r is not unit and r.started_at > unit.failure_since for r in ready)  # type: ignore[operator]
            ):
                unit.clear()  # a later start of this unit, or of another layout of the service, is ready
            failure = unit.failed_now(now)
            if failure is not None:
                conditions.append(self._condition(
                    ENGINE_FAILED, name, summary=f"{self.layouts.get(name) or name} failed: {failure.summary}",
                    description=card_description(failure, self._where(name)), hint=failure.hint or "",
                    since=unit.failure_since, extra=card_annotations(failure)))
            elif (ENGINE_FAILED, name) in active and not self._over(unit, ready):
                conditions.append(self._keep(ENGINE_FAILED, name))  # e.g. restarting, or not yet read since our start
        return Verdict(self._scope(ENGINE_FAILED), tuple(conditions))

    @staticmethod
    def _over(unit: UnitWatch, ready: list[UnitWatch]) -> bool:
        """Evidence that a unit's failure ended: a start of it, or of another layout, is ready; or it was
        stopped cleanly (or its failure reset)."""
        state = unit.state
        stopped = state is not None and state.active == "inactive" and state.result in (None, "", "success")
        return unit.failure is None and (unit.ready or stopped or any(r is not unit for r in ready))

    def _crash_loop(self, now: float, active: Active) -> Verdict:
        needed, window = self.t.crash_loop_restarts, self.t.crash_loop_window_s
        conditions = []
        for name, unit in self.units.items():
            count = unit.restarts(now)
            if count >= needed:
                cause = unit.last_cause
                said = f"; last death: {cause.summary}" if cause else ""
                conditions.append(self._condition(
                    CRASH_LOOP, name,
                    summary=f"{name} is crash-looping: {count} restarts in {window / 60:g} min{said}",
                    description=(card_description(cause, self._where(name)) if cause else self._where(name))
                    + f". systemd's restart counter: {unit.n_restarts if unit.n_restarts is not None else 'unknown'}",
                    hint=(cause.hint or "") if cause else "read the unit's journal: each start dies the same way",
                    since=unit.nth_restart_at(count - needed + 1, now),
                    extra=card_annotations(cause) if cause else ()))
            elif (CRASH_LOOP, name) in active:
                quiet_from = max(unit.last_restart_at() or self.watching_since, self.watching_since)
                if now - quiet_from < window:  # not yet a whole window without a restart
                    conditions.append(self._keep(CRASH_LOOP, name))
        return Verdict(self._scope(CRASH_LOOP), tuple(conditions))

    def _hung(self, now: float, active: Active) -> Verdict:
        conditions = []
        for name, unit in self.units.items():
            since = unit.hung_since()
            if since is not None and now - since >= self.t.start_hang_s:
                phase = unit.phase.value if unit.phase is not None else "starting"
                conditions.append(self._condition(
                    START_HUNG, name,
                    summary=f"{self.layouts.get(name) or name} has shown no new start-up phase for "
                            f"{self.t.start_hang_s:g} s (still {phase})",
                    description=f"{self._where(name)}: the start has been in phase {phase} since the "
                                f"journal last moved it; /health does not answer ready",
                    hint="look at the journal's last lines (a rank waiting on NCCL, a download, a lock); "
                         "restart it if nothing moves",
                    since=since + self.t.start_hang_s))
            elif (START_HUNG, name) in active and unit.state is None:
                conditions.append(self._keep(START_HUNG, name))
        return Verdict(self._scope(START_HUNG), tuple(conditions))

    def _flapping(self, now: float, active: Active) -> Verdict:
        count, window = self.health.count(now), self.t.flapping_window_s
        if count >= self.t.flapping_changes:
            return Verdict(self._scope(HEALTH_FLAPPING), (self._condition(
                HEALTH_FLAPPING, summary=f"{self.service} on {self.host}: /health changed {count} times in "
                                         f"{window / 60:g} min",
                description=f"{self.service} on {self.host} went between ready and not ready {count} times",
                hint="an engine that dies and restarts, or a probe that times out under load: see the journal",
                since=self.health.changes.nth_latest(count - self.t.flapping_changes + 1, now)),))
        quiet_from = max(self.health.changes.last or self.watching_since, self.watching_since)
        if (HEALTH_FLAPPING, "") in active and now - quiet_from < window:
            return Verdict(self._scope(HEALTH_FLAPPING), (self._keep(HEALTH_FLAPPING),))
        return Verdict(self._scope(HEALTH_FLAPPING))

    def _down(self, now: float, active: Active) -> Verdict:
        """/health down or unreadable for `health_down_s` while a unit runs whose start was ready (a start
        that never gets there is ServeStartHung's; a unit that died, ServeEngineFailed's)."""
        served = [name for name, u in self.units.items() if u.running and u.ready]
        since = self.down_since
        if served and since is not None and now - since >= self.t.health_down_s:
            unit = served[0]
            why = f" ({self.down_why})" if self.down_why else ""
            return Verdict(self._scope(HEALTH_DOWN), (self._condition(
                HEALTH_DOWN, unit,
                summary=f"{self.service} on {self.host}: /health has not answered ready for "
                        f"{self.t.health_down_s:g} s{why} while {unit} runs",
                description=f"{self._where(unit)} is active and its start was ready, but /health has been down or "
                            f"unreadable for {self.t.health_down_s:g} s or more{why}",
                hint="the engine runs but does not serve: read its journal's last lines (a hang, a deadlock, "
                     "a port taken) and restart it if it does not come back",
                since=since),))
        ended = self.health_read and (since is None or not any(u.running for u in self.units.values()))
        kept = tuple(self._keep(HEALTH_DOWN, unit) for name, unit in active if name == HEALTH_DOWN)
        return Verdict(self._scope(HEALTH_DOWN), () if ended else kept)

    def _holding(self, alertname: str, holding: Holding, threshold: float, active: Active, what: str,
                 now: float, *, percent: bool = False) -> Verdict:
        firing = (alertname, "") in active
        value = holding.value
        if holding.held(now) or (firing and value is not None and value >= threshold):
            reading = f"{100 * value:.1f}%" if percent and value is not None else f"{value:g}"
            return Verdict(self._scope(alertname), (self._condition(
                alertname, summary=f"{self.service} on {self.host}: {what} for {holding.for_s:g} s (now {reading})",
                description=f"the engine's own /metrics: {what} since it was first read so",
                hint="more load than this layout serves: add replicas, or a layout with more KV cache",
                since=holding.fires_at()),))
        if firing and not self.engine_read:
            return Verdict(self._scope(alertname), (self._keep(alertname),))
        return Verdict(self._scope(alertname))

    def _ranks(self, now: float) -> Verdict | None:
        """A rank dead or wedged for `rank_dead_s`; no verdict at all where no rank liveness is reported."""
        if self.ranks is None:
            return None
        conditions = []
        for rank in self.ranks:
            since = self._dead_since.get((rank.host, rank.rank))
            if rank.alive or since is None or now - since < self.t.rank_dead_s:
                continue
            conditions.append(self._condition(
                RANK_DEAD, rank.unit, summary=f"{self.service}: rank {rank.rank} on {rank.host} is not alive"
                + (f" ({rank.detail})" if rank.detail else ""),
                description=f"{self.service}, whose head is {self.host}: rank {rank.rank} on {rank.host} "
                            f"has not been alive for {self.t.rank_dead_s:g} s; the head's /health may still say 200",
                hint="a service is as healthy as its worst rank: restart every rank together",
                since=since + self.t.rank_dead_s, extra=(("rank", rank.rank), ("rank_host", rank.host))))
        return Verdict(self._scope(RANK_DEAD), tuple(conditions))
