"""One unit as the watch daemon follows it: its starts, deaths and restarts, its phase, and its failure.

Fed from two sources that each see what the other may miss: the unit's journal, read once by the host's
journal hub (a start is systemd's `Started` line, a death the phase tracker's `failed`, a cause the
triaged finding), and the unit's state polled from systemd (NRestarts, ActiveState, Result). Restarts
are counted from both, and the higher count wins, so neither a journal without systemd's lines nor a
unit whose counter was reset hides a crash loop.
"""

from __future__ import annotations

from console.domain.alerts.thresholds import AlertThresholds
from console.domain.alerts.windows import EventWindow
from console.domain.values import Finding, FindingClass, Phase, ReadinessEvent, UnitState

#: Restarts recorded at once for a jump in NRestarts (15,000 restarts while nobody watched are a crash loop
#: whether 3 or 15,000 of them are counted).
MAX_RESTARTS_PER_READING = 64
_RESTARTING_SUBS = ("auto-restart",)


def state_failed(state: UnitState) -> bool:
    """The unit failed, or died and waits for its automatic restart."""
    if state.active == "failed":
        return True
    return state.sub in _RESTARTING_SUBS and state.result not in (None, "", "success")


def state_finding(state: UnitState) -> Finding:
    """A failure the unit state shows and the journal has not (yet) named."""
    how = f"result {state.result}" if state.result else state.active
    if state.exec_main_status is not None:
        how += f", status {state.exec_main_status}"
    summary = f"{state.unit} failed ({state.active}/{state.sub}, {how})"
    line = f"{state.unit}: ActiveState={state.active} SubState={state.sub} Result={state.result}"
    return Finding(cls=FindingClass.UNIT_FAILED, line=line, summary=summary, ts=state.since)


class UnitWatch:
    """What the rules know of one unit.

    Args:
        unit: The unit.
        thresholds: The rules' numbers.
    """

    def __init__(self, unit: str, thresholds: AlertThresholds) -> None:
        self.unit = unit
        self.thresholds = thresholds
        window = thresholds.crash_loop_window_s
        self.restarts_seen = EventWindow(window)
        """Starts that followed a death, from the journal."""
        self.restarts_counted = EventWindow(window)
        """Increments of systemd's NRestarts, at the time they were read."""
        self.n_restarts: int | None = None
        self.state: UnitState | None = None
        self.main_pid: int | None = None
        self.died_in_start = False
        self.started_at: float | None = None
        self.progress_at: float | None = None
        self.phase: Phase | None = None
        self.ready = False
        """The current start reached ready (its log said so, or /health answered 200 while it ran)."""
        self.failure: Finding | None = None
        """The open failure's decisive finding: set at a death, kept across restarts until a start is ready."""
        self.failure_since: float | None = None
        self.failure_due: float | None = None
        """When the failure may fire: at once for a root cause, after a short wait for a summary's cause."""
        self.from_state = False
        self.last_cause: Finding | None = None
        """The cause of the latest death (what a crash loop is named with)."""
        self.console_starts: tuple[tuple[float, float], ...] = ()
        """(from, to) of the console's own switches of this unit's service (the audit log's): a start in one
        is the operator's, not a restart."""
        self.replaying = False
        """Its journal is being read back from before the daemon began: the rules judge it once it has caught
        up, so a failure a later start repaired long ago (or a start that was ready long ago) fires nothing."""

    # -- the journal --------------------------------------------------------------------------------
    def phase_seen(self, event: ReadinessEvent, *, by_systemd: bool) -> None:
        """A phase event the hub's tracker read in one of the unit's journal entries."""
        ts = event.ts
        if event.phase is Phase.STARTING and by_systemd:
            if self.died_in_start:
                self.restarts_seen.add_once(ts)
            self.died_in_start = False
            self.started_at, self.progress_at, self.ready = ts, ts, False
        elif event.phase is Phase.FAILED:
            self.died_in_start = True
        elif event.phase is Phase.READY:
            self.mark_ready(ts)
        elif event.phase is not Phase.STOPPED:
            self.progress_at = ts
        self.phase = event.phase

    def fatal(self, cause: Finding, ts: float, *, root: bool) -> None:
        """The decisive finding of the current start, as far as the journal has shown it.

        Args:
            cause: The decisive finding (the caller's triage picked it).
            ts: When its line was logged.
            root: It names a root cause, not a summary of a death: it fires at once.
        """
        due = ts + (0.0 if root else self.thresholds.failure_settle_s)
        if self.failure is None:
            self.failure_since, self.failure_due = ts, due
        else:
            self.failure_due = min(self.failure_due or due, due)
        self.failure, self.from_state, self.last_cause = cause, False, cause

    def mark_ready(self, ts: float) -> None:
        """The current start is ready: a failure before it is over."""
        self.ready = True
        self.progress_at = ts
        self.phase = Phase.READY
        if self.recovered():
            self.clear()

    # -- systemd's view -----------------------------------------------------------------------------
    def observe(self, state: UnitState, now: float) -> None:
        """A reading of the unit's state."""
        before = self.n_restarts
        count = state.n_restarts
        if count is not None and before is not None and count > before:
            self.restarts_counted.add(now, min(count - before, MAX_RESTARTS_PER_READING))
        self.n_restarts = count
        self.state = state
        if state.is_running and state.sub not in _RESTARTING_SUBS:
            since = state.since or now
            new_pid = self.main_pid is not None and state.main_pid not in (None, self.main_pid)
            if self.started_at is None or (new_pid and since > self.started_at + 1.0):  # a start the journal missed
                self.started_at, self.progress_at, self.ready = since, since, False
            self.main_pid = state.main_pid or self.main_pid
        if state_failed(state) and self.failure is None:
            finding = state_finding(state)
            self.failure, self.from_state = finding, True
            self.failure_since = state.since or now
            self.failure_due = now + self.thresholds.state_grace_s
            self.last_cause = self.last_cause or finding
        elif state.active == "inactive" and state.result in (None, "", "success"):
            self.clear()  # stopped cleanly, or its failure reset: nothing is wrong with it now
            self.started_at = None

    def clear(self) -> None:
        """The failure is over."""
        self.failure = self.failure_since = self.failure_due = None
        self.from_state = False

    # -- what the rules read ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.state is not None and self.state.is_running and self.state.sub not in _RESTARTING_SUBS

    def recovered(self) -> bool:
        """A start after the failure reached ready."""
        return (self.failure is not None and self.ready and self.started_at is not None
                and self.failure_since is not None and self.started_at > self.failure_since)

    def failed_now(self, now: float) -> Finding | None:
        """The failure to alert on now, or None (none, or it still waits for its cause)."""
        if self.failure is None or self.failure_due is None or now < self.failure_due:
            return None
        return self.failure

    def _seen(self, now: float) -> list[float]:
        """Restarts the journal showed within the window, less the console's own starts (systemd's counter
        counts only its automatic restarts: nothing to take out of it)."""
        return [t for t in self.restarts_seen.times(now)
                if not any(lo <= t <= hi for lo, hi in self.console_starts)]

    def restarts(self, now: float) -> int:
        return max(len(self._seen(now)), self.restarts_counted.count(now))

    def nth_restart_at(self, n: int, now: float) -> float | None:
        """When the unit's n-th most recent restart in the window happened (the one that crossed N)."""
        seen = self._seen(now)
        if len(seen) >= self.restarts_counted.count(now):
            return seen[-n] if 0 < n <= len(seen) else None
        return self.restarts_counted.nth_latest(n, now)

    def last_restart_at(self) -> float | None:
        seen = self.restarts_seen.last
        if seen is not None and any(lo <= seen <= hi for lo, hi in self.console_starts):
            seen = None
        times = [t for t in (seen, self.restarts_counted.last) if t is not None]
        return max(times) if times else None

    def hung_since(self) -> float | None:
        """Since when the current start has shown no new phase, if it is still starting."""
        if not self.running or self.ready or self.failure is not None or self.started_at is None:
            return None
        return max(self.started_at, self.progress_at or self.started_at)
