"""Watching one start: the journal, the unit state and the health probe at once; the first decisive event wins.

- The journal gives phases, progress and triaged findings. A classified fatal finding (CUDA OOM, NCCL,
  port in use, ...) fails the start at once; systemd's `Main process exited` line does too.
- The unit state catches a death the journal does not explain. It waits a moment for the journal, then
  reads the start's own lines as an ended log (a cut traceback) before it says `unit_failed`.
- The probe confirms HTTP readiness only once the engine's own log says HTTP is up: `/health` is the
  engine reporting itself, and `/v1/models` alone never means ready.
- HTTP ready is not READY: a streamed one-token completion must then return its first token
  (`first_token_check`, on by default; hosts/endpoints/first_token.py). The verdict is that request's
  first chunk itself, awaited, not a poll. Three times are kept, in order: the port answered HTTP, HTTP
  ready (the engine's ready line or `/health` 200, once the port has answered), the first token.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from console.config import ServiceConfig
from console.domain.triage import OPEN, Triager, as_engine_error, decisive, tier_of
from console.domain.values import Engine, Finding, FindingClass, Phase, UnitState
from console.hosts.base import Host
from console.hosts.endpoints import FirstTokenProbe, first_token_probe
from console.hosts.journal_hub import ReadEntry
from console.ops.switch.cancel import stop_tasks
from console.ops.switch.events import (
    FAILED,
    READY,
    TIMEOUT,
    FindingEvent,
    HealthEvent,
    PhaseEvent,
    ProgressEvent,
    StateEvent,
    StepEvent,
    SwitchEvent,
)

#: A state-detected death waits for the journal to explain it, up to JOURNAL_GRACE_S; the wait ends as
#: soon as the journal decides (the engine's fatal line, or systemd's `Main process exited`, logged
#: after the engine's last lines). Over SSH under load `journalctl -f` trails the state by up to 1 s.
JOURNAL_GRACE_S = 2.0
#: How long systemd's `Main process exited` waits for the engine's own cause to follow it in the journal.
UNIT_LINE_TRAIL_S = 0.4
#: A start's own lines kept, to read as a whole log once the unit has died.
START_LOG_LINES = 2000
#: The longest one first-token request waits for its token before it is sent again.
FIRST_TOKEN_ATTEMPT_S = 60.0
#: Phases after which a 200 from /health counts as the engine's own readiness.
_HTTP_PHASES = (Phase.HTTP_UP, Phase.WARMING_UP, Phase.READY)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one watched start."""

    outcome: str
    reason: str
    failure: Finding | None
    decisive_ts: float
    """When the decisive journal entry was logged, the state changed or the probe answered."""
    verdict_at: float
    phase: Phase
    port_open_s: float | None = None
    """Seconds from the start to the first HTTP answer (any status) the console had from the engine."""
    http_ready_s: float | None = None
    """... to HTTP ready: the engine's ready line or `/health` 200, and the port answering."""
    first_token_s: float | None = None
    """... to the first token of the one-token completion (None with `first_token_check = false`)."""

    @property
    def detected_after_s(self) -> float:
        return max(0.0, self.verdict_at - self.decisive_ts)


class StartFollower:
    """Watches one unit's start until it is ready, has failed, or the time is up."""

    def __init__(
        self,
        host: Host,
        service: ServiceConfig,
        unit: str,
        *,
        layout: str,
        emit: Callable[[SwitchEvent], None],
        started_mono: float,
        rollback: bool = False,
        state_poll_s: float = 0.1,
        health_poll_s: float = 0.5,
        node: str | None = None,
        decides_ready: bool = True,
    ) -> None:
        """`node` names the host in each event, for a service over several hosts; a node that serves no
        HTTP (a worker) never `decides_ready`: only the head's readiness is the service's."""
        self.host = host
        self.node = node
        self.decides_ready = decides_ready
        self.service = service
        self.unit = unit
        self.layout = layout
        self._emit_cb = emit
        self.started_mono = started_mono
        self.rollback = rollback
        self.state_poll_s = state_poll_s
        self.health_poll_s = health_poll_s
        self.phase = Phase.STOPPED  # as the host's journal hub reads it, FAILED once a fatal line is seen
        self.unexplained: list[Finding] = []  # non-fatal exceptions: the cause if the unit then dies
        self.findings: list[Finding] = []  # every finding of this start, for the decisive one
        self._verdict: asyncio.Future[Verdict] | None = None
        self._cursor: str | None = None
        self._last_phase: Phase | None = None
        self._log: deque[tuple[str, float, bool]] = deque(maxlen=START_LOG_LINES)  # this start's own lines
        self._exited_mono: float | None = None  # when the main process was seen gone (journal or state)
        self.port_open_s: float | None = None
        self.http_ready_s: float | None = None
        self.first_token_s: float | None = None
        self._http_ready_why: str | None = None
        self._first_token_error: str | None = None
        self._first_token_task: asyncio.Task[None] | None = None

    # -- plumbing ----------------------------------------------------------------------------------------

    def _elapsed(self) -> float:
        return time.monotonic() - self.started_mono

    def emit(self, cls: type[SwitchEvent], **fields: object) -> None:
        self._emit_cb(cls(layout=self.layout, elapsed_s=self._elapsed(), rollback=self.rollback, node=self.node,
                          **fields))

    def decide(self, outcome: str, reason: str, failure: Finding | None, decisive_ts: float) -> None:
        if self._verdict is not None and not self._verdict.done():
            verdict = Verdict(outcome, reason, failure, decisive_ts, time.time(), self.phase,
                              port_open_s=self.port_open_s, http_ready_s=self.http_ready_s,
                              first_token_s=self.first_token_s)
            self._verdict.set_result(verdict)

    async def run(self, *, after_cursor: str | None, timeout_s: float) -> Verdict:
        """Watch until the first decisive event; the journal starts after `after_cursor`."""
        self._verdict = asyncio.get_running_loop().create_future()
        self._cursor = after_cursor
        tasks = [
            asyncio.create_task(self._watch_journal(), name="watch-journal"),
            asyncio.create_task(self._watch_state(), name="watch-state"),
            asyncio.create_task(self._watch_health(), name="watch-health"),
        ]
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(self._verdict)
        except TimeoutError:
            now = time.time()
            reason = f"no verdict within {timeout_s:g} s (last phase: {self.phase.value})"
            if self.http_ready_s is not None and self.first_token_s is None:
                why = self._first_token_error or "the request is still waiting for it"
                reason = (f"HTTP ready after {self.http_ready_s:.1f} s, but no first token within {timeout_s:g} s "
                          f"of the start ({why})")
            self.decide(TIMEOUT, reason, None, now)  # also tells the watchers to end
            return self._verdict.result()
        finally:
            if not self._verdict.done():
                self._verdict.cancel()  # run() itself was cancelled: the watchers end all the same
            if self._first_token_task is not None:
                tasks.append(self._first_token_task)
            await stop_tasks(tasks)

    # -- the three watchers (each also ends by itself once there is a verdict) ---------------------------

    def decided(self) -> bool:
        return self._verdict is not None and self._verdict.done()

    async def _watch_journal(self) -> None:
        while not self.decided():
            try:
                # The host's one stream of this unit (the journal pane reads it too), each line read once;
                # after this start's cursor, as a new start, so a failure that recurs is named again.
                stream = self.host.journals.subscribe(
                    self.unit, engine=self.service.engine, after_cursor=self._cursor, new_start=True
                )
                async with contextlib.aclosing(stream):
                    async for read in stream:
                        self._cursor = read.entry.cursor
                        self.on_entry(read)
                        if self.decided():
                            return
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped stream resumes after the last cursor
                self.emit(StepEvent, step="watch", detail=f"journal stream: {exc}; resuming", unit=self.unit)
                await asyncio.sleep(0.5)

    def on_entry(self, read: ReadEntry) -> None:
        """Take one journal entry's phase and findings, and decide if it is decisive."""
        entry, event = read.entry, read.phase
        self._log.append((entry.message, entry.ts, entry.by_systemd))
        if event is not None and self.phase is Phase.FAILED:
            event = None  # a straggler line of the start that already failed
        if event is not None:
            self.phase = event.phase
        if event is not None and event.phase is not Phase.FAILED:
            if event.phase is not self._last_phase:
                self._last_phase = event.phase
                self.emit(PhaseEvent, phase=event.phase, detail=event.detail, rank=event.rank, ts=entry.ts)
            if event.progress is not None:
                self.emit(
                    ProgressEvent,
                    phase=event.phase,
                    progress=event.progress,
                    detail=event.detail,
                    ts=entry.ts,
                )
            if event.phase is Phase.READY and self.decides_ready:
                self.http_ready("the engine reports it is ready", entry.ts)
        for finding in read.findings:
            self.emit(FindingEvent, finding=finding)
            self.findings.append(finding)
            if finding.cls is FindingClass.TRACEBACK:
                self.unexplained.append(finding)
            if not finding.fatal:
                continue
            if entry.by_systemd:
                self._exited_mono = self._exited_mono or time.monotonic()
            if tier_of(finding.cls) >= OPEN:
                # A summary of the death (systemd's exit status, "EngineCore failed to start", a bare
                # exception) may precede its cause in the journal (journald may store systemd's line
                # before the engine's last stdout lines): the cause can come until the process is gone.
                self._trail(entry.ts, time.monotonic())
            else:
                self.phase = Phase.FAILED
                self._decide_failed(entry.ts)

    def _trail(self, ts: float, summary_mono: float) -> None:
        """Decide on a summary once the process has been gone UNIT_LINE_TRAIL_S, or JOURNAL_GRACE_S after it."""
        if self.decided():
            return
        now = time.monotonic()
        if self._exited_mono is not None:
            wait = UNIT_LINE_TRAIL_S - (now - self._exited_mono)
        else:
            wait = min(UNIT_LINE_TRAIL_S, JOURNAL_GRACE_S - (now - summary_mono))
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self._trail, ts, summary_mono)
        else:
            self._decide_failed(ts)

    def _decide_failed(self, ts: float) -> None:
        """Fail the start with the decisive finding: the root cause, its consequences under it."""
        failure = decisive(self.findings)
        if failure is not None and failure.cls is FindingClass.UNIT_FAILED:
            failure = self._ended_on() or failure  # systemd's exit status names no cause: look for one
        elif failure is not None and tier_of(failure.cls) >= OPEN:
            # The cause may sit in a block the live reader still holds open: pydantic's `Value error, ...`
            # under a ValidationError is read whole only at the next line, which a real vLLM writes when
            # its process exits, seconds later. The start read as an ended log closes the block.
            ended = self._ended_on()
            if ended is not None and tier_of(ended.cls) < tier_of(failure.cls):
                failure = ended
        if failure is not None:
            self.decide(FAILED, failure.summary, failure, ts)

    async def _watch_state(self) -> None:
        last: UnitState | None = None
        while not self.decided():
            try:
                state = await self.host.services.state(self.unit)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.emit(StepEvent, step="watch", detail=f"unit state: {exc}", unit=self.unit)
                await asyncio.sleep(max(self.state_poll_s, 0.5))
                continue
            if last is None or (state.active, state.sub, state.result) != (
                last.active,
                last.sub,
                last.result,
            ):
                self.emit(StateEvent, state=state)
            last = state
            if state.active in ("failed", "inactive") or state.sub == "auto-restart":
                self._exited_mono = self._exited_mono or time.monotonic()
                changed_at = state.since or time.time()
                await self._journal_grace()  # let the journal name the cause first
                if not self.decided():
                    self.decide(FAILED, *self._state_cause(state), changed_at)
                return
            await asyncio.sleep(self.state_poll_s)

    async def _journal_grace(self) -> None:
        """Wait until the journal decides, JOURNAL_GRACE_S at most."""
        assert self._verdict is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(JOURNAL_GRACE_S):
                await asyncio.shield(self._verdict)

    def _state_cause(self, state: UnitState) -> tuple[str, Finding]:
        cause = decisive(self.findings) or self._ended_on()
        if cause is None and self.unexplained:
            cause = as_engine_error(self.unexplained[-1])  # the exception the journal holds ended it
        if cause is not None:
            return cause.summary, cause
        how = f"result {state.result}" if state.result else state.active
        if state.exec_main_status is not None:
            how += f", status {state.exec_main_status}"
        summary = f"{self.unit} ended before it was ready ({state.active}, {how})"
        line = f"{self.unit}: ActiveState={state.active} SubState={state.sub} Result={state.result}"
        return summary, Finding(cls=FindingClass.UNIT_FAILED, line=line, summary=summary, ts=state.since)

    def _ended_on(self) -> Finding | None:
        """The start's own log read as an ended log (a live stream never ends): the end-of-log rules."""
        triager = Triager(self.service.engine)
        for message, ts, by_systemd in self._log:
            triager.feed(message, ts, by_systemd)
        triager.finish()
        return triager.decisive()

    async def _watch_health(self) -> None:
        probe = self.host.probes.get(self.service.name) if self.decides_ready else None
        if probe is None:
            return
        last_status: str | None = None
        while not self.decided():
            try:
                sample = await probe.probe()
            except asyncio.CancelledError:
                raise
            except Exception:
                sample = None
            if sample is not None:
                if sample.status != last_status:
                    self.emit(HealthEvent, sample=sample)
                    last_status = sample.status
                if sample.http_status is not None:
                    self._port_answered(f"HTTP {sample.http_status} to /health")
                engine_says_up = self.phase in _HTTP_PHASES or self.service.engine is Engine.OPENAI
                if sample.status == "ready" and engine_says_up:
                    self.http_ready("/health answers 200", sample.taken_at)
            await asyncio.sleep(self.health_poll_s)

    # -- HTTP ready, then the first token -----------------------------------------------------------------

    def _port_answered(self, how: str) -> None:
        if self.port_open_s is None and not self.decided():
            self.port_open_s = self._elapsed()
            self.emit(StepEvent, step="port-open", detail=f"port open: {how}", unit=self.unit)
            if self._http_ready_why is not None:
                self._mark_http_ready()

    def http_ready(self, why: str, ts: float) -> None:
        """The engine says it serves (its ready line, or `/health` 200): READY, or, with
        `first_token_check`, the one-token request that decides it."""
        if self._http_ready_why is not None or self.decided():
            return
        self._http_ready_why = why
        prober = first_token_probe(self.host.probes.get(self.service.name))
        if not self.service.first_token_check or prober is None:
            if self.port_open_s is not None:
                self._mark_http_ready()
            else:
                self.http_ready_s = self._elapsed()
            self.decide(READY, why, None, ts)
            return
        if self.port_open_s is not None:
            self._mark_http_ready()
        self._first_token_task = asyncio.create_task(self._first_token(prober), name="watch-first-token")

    def _mark_http_ready(self) -> None:
        if self.http_ready_s is None:
            self.http_ready_s = max(self._elapsed(), self.port_open_s or 0.0)
            self.emit(StepEvent, step="http-ready", detail=f"HTTP ready: {self._http_ready_why}", unit=self.unit)

    async def _first_token(self, prober: FirstTokenProbe) -> None:
        """Send the one-token request until a token arrives; each failed attempt is said once."""
        while not self.decided():
            attempt = await prober.first_token(FIRST_TOKEN_ATTEMPT_S)
            if attempt.http_status is not None:
                self._port_answered(f"HTTP {attempt.http_status} to /v1/completions")
            if attempt.ok and self.http_ready_s is not None:
                assert attempt.first_token_at is not None
                self.first_token_s = max(self._elapsed() - (time.time() - attempt.first_token_at), self.http_ready_s)
                took = attempt.first_token_at - attempt.sent_at
                self.emit(StepEvent, step="first-token", detail=f"first token in {took:.2f} s", unit=self.unit)
                why = f"{self._http_ready_why}, and a streamed request got its first token in {took:.2f} s"
                self.decide(READY, why, None, attempt.first_token_at)
                return
            if attempt.error is not None and attempt.error != self._first_token_error:
                self._first_token_error = attempt.error
                self.emit(StepEvent, step="first-token", detail=f"no token yet: {attempt.error}", unit=self.unit)
            await asyncio.sleep(max(self.health_poll_s, 0.2))
