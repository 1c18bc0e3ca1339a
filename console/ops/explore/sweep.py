"""Explore: switch to each layout, probe it, record it, and end on the best one.

For each layout in order: the fit preflight (a predicted `oom` or `invalid` is `skipped`, unless
`include_oom`); the switch, as `switch` does it (watched to READY, rolled back on failure: a failed layout
is `failed` with its triaged cause, a slow one `timeout`); the probe at each concurrency, then the unit's
state read again (an engine that died mid-probe, or a probe in which no request succeeded, is `failed`);
the record. At the end a healthy layout runs: the best by the pick rule if it is still healthy (with
`--return`, or when no layout meets the rule, the layout that ran at the start), else the start layout,
else the last good one.

With `by_prediction` (explore without `--all`) the layouts go fastest-predicted first and a layout whose
optimistic bound cannot beat the best measured so far is pruned (forecast.py); every measured level keeps
a receipt of prediction against measurement.

Progress is in the results store beside the audit log, so `resume` goes on after the last layout
recorded. A cancel (Ctrl-C, SIGTERM, SIGHUP) stops the probe and leaves a ready layout running: the one
it was on if it is ready, else the last good one. Two explores of one service exclude each other through
a host lock, taken for the whole sweep; a plain switch or probe of the service takes it for its own run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.config import ServiceConfig
from console.errors import ConsoleError, UsageError
from console.hosts.base import Host, LockBusy
from console.ops.explore.forecast import Forecaster
from console.ops.explore.probe import LevelProgress, probe_service
from console.ops.explore.report import (
    FAILED,
    MEASURED,
    PRUNED,
    SKIPPED,
    TIMEOUT,
    ExploreOptions,
    ExploreResult,
    LayoutDone,
    LayoutReport,
)
from console.ops.explore.results_store import DONE, INTERRUPTED, RUNNING, LayoutOutcome, ResultsStore
from console.ops.explore.results_table import best_layout, levels_of, score
from console.ops.fit_check import fit_layout, host_capacity
from console.ops.speed_check import host_speed_context
from console.ops.status import running_layout, unit_states
from console.ops.switch import READY, UNCHANGED, StepEvent, explore_lock_name, resolve, switch_layout

if TYPE_CHECKING:
    from console.ops.audit import AuditLog

#: How long a cancelled switch waits for a start already asked for to land (it is seconds at most).
START_LANDS_S = 10.0
EventSink = Callable[[Any], None]
"""Gets every event: the switches' events, each probe level (ProbeResult), each LayoutDone."""


class ExploreRefused(ConsoleError):
    """Another explore, a plain switch or a plain probe of this service runs, or there is nothing to resume."""


class Explore:
    """One sweep of one service, under the service's explore lock."""

    def __init__(self, host: Host, service: ServiceConfig, *, audit: AuditLog, store: ResultsStore,
                 on_event: EventSink | None = None, on_progress: LevelProgress | None = None) -> None:
        self.host, self.service, self.audit, self.store = host, service, audit, store
        self.emit = on_event or (lambda _e: None)
        self.on_progress = on_progress
        self.current: str | None = None  # the layout running and ready, as far as this sweep knows
        self.last_good: str | None = None

    async def _running(self) -> str | None:
        """The layout whose unit runs now, whatever its health."""
        states = await unit_states(self.host, self.service)
        return running_layout(self.host.name, self.service, states, self.audit)[1]

    async def _running_ready(self) -> str | None:
        """The running layout if its health probe says ready, else None."""
        layout = await self._running()
        probe = self.host.probes.get(self.service.name)
        if layout is None or probe is None:
            return None
        return layout if (await probe.probe()).status == "ready" else None

    async def _switch(self, name: str, *, force: bool, timeout_s: float) -> tuple[Any, float]:
        """Switch, and on a cancel let a start already asked for land before the switch stops: a start
        cut off mid-way (`systemctl start` over SSH, the demo's spawn) still brings its unit up a moment
        later, where the next switch's stop step would not see it and two engines would share the GPUs."""
        t0 = time.monotonic()
        starting = asyncio.Event()
        started = asyncio.Event()

        def watch_steps(event: Any) -> None:
            if isinstance(event, StepEvent) and not event.rollback:
                if event.step == "start":
                    starting.set()
                elif event.step == "watch":
                    started.set()
            self.emit(event)

        task = asyncio.ensure_future(switch_layout(
            self.host, self.service, name, force=force, timeout_s=timeout_s, audit=self.audit,
            on_event=watch_steps, within_explore=True))  # fmt: skip
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if starting.is_set() and not started.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(START_LANDS_S):
                        await started.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise
        if result.outcome in (READY, UNCHANGED):
            self.current = self.last_good = name
        elif result.rollback is not None and result.rollback.outcome == READY:
            self.current = self.last_good = result.rollback.layout
        else:
            self.current = None
        return result, time.monotonic() - t0

    async def one_layout(self, name: str, opts: ExploreOptions, capacity, explore_id: int) -> LayoutReport:
        t0 = time.monotonic()
        _svc, lc = resolve(self.host, self.service, name)
        fit = fit_layout(self.service, lc, capacity)
        fit_json = fit.to_json() if fit is not None else None
        if fit is not None and fit.verdict in ("oom", "invalid") and not opts.include_oom:
            return LayoutReport(name, SKIPPED, fit_json, elapsed_s=time.monotonic() - t0)
        switch_s = 0.0
        if self.current != name:
            result, switch_s = await self._switch(name, force=opts.include_oom, timeout_s=opts.switch_timeout_s)
            if result.outcome not in (READY, UNCHANGED):
                failure = result.failure.to_json() if result.failure is not None else None
                failure = failure or {"summary": result.reason}
                if result.rollback is not None:
                    failure = {**failure, "rollback": {"layout": result.rollback.layout,
                                                       "outcome": result.rollback.outcome}}
                outcome = TIMEOUT if result.outcome == TIMEOUT else FAILED
                return LayoutReport(name, outcome, fit_json, failure, switch_s=switch_s,
                                    elapsed_s=time.monotonic() - t0)
        p0 = time.monotonic()
        try:
            levels = await probe_service(self.host, self.service, opts.probe, audit=self.audit, store=self.store,
                                         explore_id=explore_id, layout=name, on_result=self.emit,
                                         on_progress=self.on_progress)  # fmt: skip
        except UsageError:
            raise
        except ConsoleError as exc:
            return LayoutReport(name, FAILED, fit_json, {"summary": f"probe: {exc}"}, switch_s=switch_s,
                                probe_s=time.monotonic() - p0, elapsed_s=time.monotonic() - t0)
        probe_s = time.monotonic() - p0
        why = await self._down_after_probe(name)
        if why is None and not any(level.summary.ok for level in levels):
            first = next((e for level in levels for e in level.summary.errors), "no answer")
            why = f"probe: no request succeeded at any level ({first})"
        outcome = MEASURED if why is None else FAILED
        return LayoutReport(name, outcome, fit_json, None if why is None else {"summary": why},
                            tuple(r.to_json() for r in levels), switch_s=switch_s, probe_s=probe_s,
                            elapsed_s=time.monotonic() - t0)  # fmt: skip

    async def _down_after_probe(self, name: str) -> str | None:
        """Why `name` no longer runs once its probe ended (its unit's state, read again), else None: an
        engine that died mid-probe leaves failed requests, never a measurement."""
        states = await unit_states(self.host, self.service)
        if running_layout(self.host.name, self.service, states, self.audit)[1] == name:
            return None
        self.current = None
        unit = self.service.unit_for(resolve(self.host, self.service, name)[1])
        state = next((s for s in states if s.unit == unit), None)
        said = "not running" if state is None else f"{state.active}/{state.sub or '-'}, result {state.result or '-'}"
        return f"{unit} is {said} after the probe: the engine died while it was measured"

    async def _leave_ready(self) -> None:
        """After a cancel: keep the layout if it is ready, else bring back the last good one."""
        self.current = await self._running_ready()
        if self.current is None and self.last_good is not None:
            await self._switch(self.last_good, force=True, timeout_s=900.0)

    async def _finish(self, opts: ExploreOptions, best: str | None, start_layout: str | None) -> None:
        """End on a healthy layout: the best measured one (the start layout with `--return`, or when none
        meets the pick rule) if it is still healthy, else the start layout, else the last good one."""
        if opts.return_to_start and start_layout is None:
            for state in await unit_states(self.host, self.service):  # it started with nothing running
                if state.is_running:
                    await self.host.services.stop(state.unit)
            self.current = None
            return
        first = start_layout if opts.return_to_start else best or start_layout
        for name in dict.fromkeys(n for n in (first, start_layout, self.last_good) if n is not None):
            if name == self.current and await self._running_ready() == name:
                return
            result, _switch_s = await self._switch(name, force=True, timeout_s=opts.switch_timeout_s)
            if result.outcome in (READY, UNCHANGED):
                return

    async def run(self, opts: ExploreOptions | None = None, *, resume: bool = False) -> ExploreResult:
        """Sweep the layouts (or go on with the unfinished sweep, with `resume`).

        Raises:
            ExploreRefused: another explore of the service runs; nothing to resume.
            UsageError: a layout name the service does not have.
        """
        t0 = time.monotonic()
        try:
            async with self.host.lock(explore_lock_name(self.service)):
                return await self._run_locked(opts, resume, t0)
        except LockBusy as exc:
            raise ExploreRefused(f"another explore or a switch or a probe of {self.service.name} runs on "
                                 f"{self.host.name} ({exc})") from None

    async def _forecaster(self, opts: ExploreOptions) -> Forecaster | None:
        """Predictions for this explore, or None where the model or the GPU is unknown (all are measured)."""
        try:
            ctx = await host_speed_context(self.host, self.service)
        except UsageError:
            return None
        return None if ctx is None else Forecaster(ctx, self.service, self.host.name, self.store, opts)

    async def _layout_by_forecast(self, name: str, opts: ExploreOptions, capacity, explore_id: int,
                                  forecaster: Forecaster | None, reports: dict[int, LayoutReport]) -> LayoutReport:
        """One layout, predicted first: pruned when its bound cannot beat the best measured, else run."""
        forecast = forecaster.forecast(name) if forecaster is not None else None
        predicted = forecast.to_json() if forecast is not None else ()
        lc = self.service.layout(name)
        fit = fit_layout(self.service, lc, capacity) if lc is not None else None
        fit_refuses = fit is not None and fit.verdict in ("oom", "invalid") and not opts.include_oom
        if opts.by_prediction and forecaster is not None and not fit_refuses:  # fit's skip comes first
            scores = [score(levels_of(r.probes), opts.pick) for r in reports.values() if r.outcome == MEASURED]
            best = max((v for v in scores if v is not None), default=None)
            why = forecaster.pruned_by(forecast, best, opts.pick)
            if why is not None:
                return LayoutReport(name, PRUNED, None, {"summary": why}, predicted=predicted)
        report = dataclasses.replace(await self.one_layout(name, opts, capacity, explore_id), predicted=predicted)
        if report.outcome == MEASURED and forecast is not None and forecaster is not None:
            forecaster.receipts(forecast, report.probes, explore_id)
        return report

    async def _run_locked(self, opts: ExploreOptions | None, resume: bool, t0: float) -> ExploreResult:
        host, svc = self.host.name, self.service.name
        running = await self._running()
        self.current = self.last_good = await self._running_ready()
        done: dict[int, LayoutOutcome] = {}
        if resume:
            record = self.store.unfinished_explore(host, svc)
            if record is None:
                raise ExploreRefused(f"{host}/{svc}: no unfinished explore to resume")
            opts = self.store.explore_params(record, ExploreOptions.from_json)  # damaged: one line naming the row
            explore_id, start_layout = record.id, record.start_layout
            forecaster = await self._forecaster(opts)
            done = self.store.outcomes(explore_id)
            self.store.set_explore_state(explore_id, RUNNING)
        else:
            if opts is None:
                raise UsageError("explore: no layouts given")
            start_layout = running  # what runs, whatever its health now: `--return` ends on it
            forecaster = await self._forecaster(opts)
            if opts.by_prediction and forecaster is not None:
                opts = dataclasses.replace(opts, layouts=forecaster.order(opts.layouts))
            explore_id = self.store.begin_explore(host, svc, opts.to_json(), start_layout)
        for name in opts.layouts:
            resolve(self.host, self.service, name)  # an unknown name is a usage error before anything runs
        reports: dict[int, LayoutReport] = {}
        for pos, outcome in done.items():
            probes = tuple(p.result for p in self.store.probes(explore_id=explore_id) if p.layout == outcome.layout)
            reports[pos] = LayoutReport(outcome.layout, outcome.outcome, outcome.fit, outcome.failure, probes)
        interrupted = False
        try:
            capacity = await host_capacity(self.host)
            for pos, name in enumerate(opts.layouts):
                if pos in reports:
                    continue
                report = await self._layout_by_forecast(name, opts, capacity, explore_id, forecaster, reports)
                reports[pos] = report
                self.store.record_outcome(explore_id, pos, LayoutOutcome(
                    name, report.outcome, report.fit, report.failure, time.time()))  # fmt: skip
                self.emit(LayoutDone(pos, report))
            ordered = [reports[p] for p in sorted(reports)]
            best = best_layout({r.layout: levels_of(r.probes) for r in ordered if r.outcome == MEASURED}, opts.pick)
            await self._finish(opts, best, start_layout)
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # the cancel was taken: what follows is the clean-up, not cancelled
            await self._leave_ready()
        ordered = [reports[p] for p in sorted(reports)]
        best = best_layout({r.layout: levels_of(r.probes) for r in ordered if r.outcome == MEASURED}, opts.pick)
        left = await self._running_ready()
        self.store.set_explore_state(explore_id, INTERRUPTED if interrupted else DONE, best=best, left_running=left)
        return ExploreResult(explore_id, host, svc, tuple(ordered), best, left, opts.pick, start_layout,
                             interrupted=interrupted, elapsed_s=time.monotonic() - t0)  # fmt: skip
