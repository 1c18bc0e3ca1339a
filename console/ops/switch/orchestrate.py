"""Switch a service to another layout, say within a second whether it came up or why it died.

1. Preflight: the fit predictor; a predicted `oom` or `invalid` refuses the switch unless forced.
2. Stop the running layout's unit(s); write the env file or drop-in (and daemon-reload) for single-unit
   services; reset-failed and start the new unit.
3. Watch journal, unit state and health probe at once (switch_watch); the first decisive event wins.
   Steps 2 and 3, and the audit of each attempt, are switch_start.py's LayoutStarter, shared by a
   switch and its rollback; this module holds the decisions around them (the service and layout,
   unchanged or restart, preflight, lock refusal, the rollback's target).
4. ready | failed (with the triaged cause) | timeout; on failure roll back to the last layout that was
   ready, unless told not to, and report the rollback's own outcome.
5. Every switch goes to the audit log; two switches of one service, or a switch and an explore,
   exclude each other through the host's locks, across processes and machines (service_locks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from console.config import LayoutConfig, ServiceConfig
from console.domain.values import Engine
from console.errors import ConsoleError, UsageError
from console.hosts.base import Host
from console.ops.cluster import node_hosts
from console.ops.evidence import EVIDENCE_DEADLINE_S, Evidence, collect_evidence, evidence_before
from console.ops.fit_check import fit_layout, host_capacity, layouts_that_fit
from console.ops.ranks import ALIVE, group_state, node_health
from console.ops.status import layout_of_unit, running_layout, unit_states
from console.ops.switch.bundling import EventRecorder, with_bundle
from console.ops.switch.events import (
    FAILED,
    READY,
    REFUSED,
    TIMEOUT,
    UNCHANGED,
    ResultEvent,
    SwitchResult,
)
from console.ops.switch.layout_starter import LayoutStarter
from console.ops.switch.locks import ServiceBusy, lock_name, switch_locks
from console.ops.switch.node_preflight import node_problems
from console.ops.switch.starter_protocol import EventSink

if TYPE_CHECKING:
    from console.ops.audit import AuditLog


def resolve(
    host: Host, service: ServiceConfig | str | None, layout_name: str | LayoutConfig
) -> tuple[ServiceConfig, LayoutConfig]:
    """The service and layout a switch names (a layout already resolved is taken as it is).

    Raises:
        UsageError: the service or the layout does not exist (the message lists the choices).
    """
    if not isinstance(service, ServiceConfig):
        found = host.config.service(service)
        if found is None:
            names = ", ".join(s.name for s in host.config.services) or "none"
            what = f"no service {service!r}" if service else "several services; name one with --service"
            raise UsageError(f"host {host.name}: {what} (services: {names})")
        service = found
    if isinstance(layout_name, LayoutConfig):
        return service, layout_name
    layout = service.layout(layout_name)
    if layout is None:
        names = ", ".join(lc.name for lc in service.layouts)
        raise UsageError(f"{host.name}/{service.name}: no layout {layout_name!r} (layouts: {names})")
    return service, layout


async def switch_layout(
    host: Host,
    service: ServiceConfig | str | None,
    layout_name: str | LayoutConfig,
    *,
    force: bool = False,
    timeout_s: float = 900.0,
    rollback: bool = True,
    restart_ready: bool = True,
    audit: AuditLog | None = None,
    on_event: EventSink | None = None,
    state_poll_s: float = 0.1,
    health_poll_s: float = 0.5,
    within_explore: bool = False,
) -> SwitchResult:
    """Switch `service` on `host` to `layout_name`; emit events as it goes and one result at the end.

    Args:
        restart_ready: when `layout_name` already runs and is ready, restart it (the TUI has asked
            first); when False, leave it serving and return an `unchanged` result.
        within_explore: this switch is an explore's own (it holds the explore lock already); any
            other switch is refused while an explore of the service runs (ops/service_locks.py).
    """
    svc, layout = resolve(host, service, layout_name)
    recorder = EventRecorder(on_event or (lambda _e: None))  # a failed start's bundle holds its events
    run = _Switch(host, svc, audit, recorder, timeout_s, state_poll_s, health_poll_s)
    t0 = time.monotonic()
    try:
        async with switch_locks(host, svc, within_explore=within_explore):
            result = await run.switch(layout, force=force, rollback=rollback, restart_ready=restart_ready)
    except ServiceBusy as exc:
        reason = str(exc)
        from_layout = await run.running_layout_or_none()
        result = run.refused(layout, reason, force, elapsed_s=time.monotonic() - t0, from_layout=from_layout)
    if not within_explore:  # an explore's failed tries are its answers, not incidents
        result = await with_bundle(host, svc, result, recorder)
    run.emit(ResultEvent(layout=result.layout, elapsed_s=result.elapsed_s, result=result))
    return result


#: How long an engine whose start failed may take to exit on its own before the rollback stops it.
FAILED_EXIT_S = 15.0


class _Switch(LayoutStarter):
    """One switch (and its rollback) under the service's lock: what to start, and whether to start it."""

    def refused(
        self,
        layout: LayoutConfig,
        reason: str,
        forced: bool,
        *,
        elapsed_s: float = 0.0,
        fit: dict | None = None,
        from_layout: str | None = None,
    ) -> SwitchResult:
        audit_id = None
        if self.audit is not None:
            audit_id = self.audit.begin(
                host=self.host.name, service=self.service.name, to_layout=layout.name,
                from_layout=from_layout, forced=forced,
            )  # fmt: skip
            self.audit.finish(
                audit_id, outcome=REFUSED, reason=reason, detected_after_s=0.0, elapsed_s=elapsed_s
            )
        now = time.time()
        return SwitchResult(
            host=self.host.name, service=self.service.name, layout=layout.name, outcome=REFUSED, reason=reason,
            from_layout=from_layout, detected_after_s=0.0, elapsed_s=elapsed_s, forced=forced, fit=fit,
            audit_id=audit_id, started_at=now - elapsed_s, verdict_at=now,
        )  # fmt: skip

    async def running_layout_or_none(self) -> str | None:
        """The layout running now, for a switch refused before it looked (None if the host cannot say)."""
        try:
            states = await unit_states(self.host, self.service)
        except ConsoleError:
            return None
        return running_layout(self.host.name, self.service, states, self.audit)[1]

    async def is_ready(self, unit: str | None) -> bool:
        """The unit runs and its health probe (where the service has one) says ready."""
        if unit is None:
            return False
        probe = self.host.probes.get(self.service.name)
        if probe is not None and (await probe.probe()).status != "ready":
            return False
        lc = self.service.layout(layout_of_unit(self.host.name, self.service, unit, self.audit) or "")
        if lc is not None and lc.nodes > 1:  # the head's 200 says nothing of the other nodes: each must be alive
            return group_state(await node_health(self.host, self.service, lc, unit)) == ALIVE
        return True

    async def switch(
        self, layout: LayoutConfig, *, force: bool, rollback: bool, restart_ready: bool = True
    ) -> SwitchResult:
        t0 = time.monotonic()
        states = await unit_states(self.host, self.service)
        unit, from_layout = running_layout(self.host.name, self.service, states, self.audit)
        if not restart_ready and from_layout == layout.name and await self.is_ready(unit):
            now = time.time()
            reason = f"{layout.name} is already running and ready on {self.host.name}; nothing done (--restart restarts it)"
            return SwitchResult(
                host=self.host.name, service=self.service.name, layout=layout.name, outcome=UNCHANGED,
                reason=reason, from_layout=from_layout, unit=unit, detected_after_s=0.0,
                elapsed_s=time.monotonic() - t0, started_at=now, verdict_at=now,
            )  # fmt: skip
        if layout.nodes > 1:  # nodes that answer, run the same engine and model, and reach the head by `nic`
            problems = await node_problems(self.host, self.service, layout)
            if problems and not force:
                reason = f"preflight: {'; '.join(problems)} (use --force to try anyway)"
                return self.refused(layout, reason, force, elapsed_s=time.monotonic() - t0, from_layout=from_layout)
            self.step(layout.name, t0, "preflight", f"{layout.nodes} nodes: " + ("; ".join(problems) + "; forced"
                      if problems else "each answers, runs the same engine and model, reaches the head"))  # fmt: skip
        capacity = await host_capacity(self.host)
        fit = fit_layout(self.service, layout, capacity)
        fit_json = fit.to_json() if fit is not None else None
        if fit is not None and fit.verdict == "oom":  # what to start instead, should it fail as predicted
            fit_json["fits_instead"] = layouts_that_fit(self.service, capacity, exclude=layout.name)
        if fit is None:
            self.step(
                layout.name, t0, "preflight", "fit unknown (no model config or GPU capacity); not checked"
            )
        elif fit.verdict in ("oom", "invalid"):
            if not force:
                reason = f"preflight: {layout.name} is predicted {fit.verdict}: {fit.reason} (use --force to try anyway)"
                return self.refused(  # the result says why; no step line repeats it
                    layout, reason, force, elapsed_s=time.monotonic() - t0, fit=fit_json, from_layout=from_layout
                )
            self.step(layout.name, t0, "preflight", f"predicted {fit.verdict}: {fit.reason}; forced")
        else:
            self.step(layout.name, t0, "preflight", f"predicted {fit.verdict}: {fit.reason}")
        before = await evidence_before(  # what the stop would destroy
            self.host, self.service, "switch", on_incident=lambda incident: self.step(
                layout.name, t0, "evidence", f"keeping the evidence of {incident.reason} ({EVIDENCE_DEADLINE_S:g} s at most)"))
        if before is not None:
            self.step(layout.name, t0, "evidence", before.words())
        result = await self.start(layout, from_layout=from_layout, forced=force, fit_json=fit_json, t0=t0,
                                  states=states)
        evidence = await self.evidence_of(result, rollback) if result.outcome in (FAILED, TIMEOUT) else None
        if evidence is not None:
            self.step(layout.name, t0, "evidence", evidence.words())
            result = replace(result, evidence=str(evidence.path))
        elif before is not None:
            result = replace(result, evidence=str(before.path))
        if result.outcome in (FAILED, TIMEOUT) and rollback:
            result = await self.roll_back(result, from_layout)
        last = result.rollback or result
        last_layout = self.service.layout(last.layout)
        if last.outcome == FAILED and last_layout is not None and last_layout.nodes > 1:
            await self.stop_failed_nodes(last_layout, last.unit, rollback=result.rollback is not None)
        return result

    async def evidence_of(self, failed: SwitchResult, rollback: bool) -> Evidence | None:
        """A failed start's own incident, collected before a rollback stops what is left of it."""
        kind = failed.failure.cls.value if failed.failure is not None else failed.outcome
        with contextlib.suppress(Exception):  # evidence that cannot be had never holds back the rollback
            return await collect_evidence(self.host, self.service, failed.reason, kind=kind,
                                          key=f"start:{failed.unit}:{failed.started_at}",
                                          since=failed.started_at or None, unit=failed.unit,
                                          same_after=failed.started_at or None,
                                          trigger="rollback" if rollback else "verdict")
        return None

    async def stop_failed_nodes(self, layout: LayoutConfig, unit: str | None, *, rollback: bool) -> None:
        """Stop every node a failed start over several hosts left running (the head first gets
        FAILED_EXIT_S to exit on its own, as a rollback gives it): a worker whose head died holds its
        GPUs for ever and serves nothing, and nothing rolls back onto it."""
        if unit is None:
            return
        if self.service.engine is Engine.VLLM:
            await self.let_exit(unit)
        t0 = time.monotonic()
        for node in reversed(node_hosts(self.host, self.service)):  # the workers first, the head last
            try:
                if not (await node.services.state(unit)).is_running:
                    continue
                self.step(layout.name, t0, "stop", f"stopping {unit} on {node.name}: the start failed, and a node "
                          "left running holds its GPUs", unit=unit, rollback=rollback)  # fmt: skip
                await node.services.stop(unit)
            except ConsoleError as exc:  # say it and go on: the other nodes still hold theirs
                self.step(layout.name, t0, "stop", f"could not stop {unit} on {node.name}: {exc}", unit=unit,
                          rollback=rollback)  # fmt: skip

    async def roll_back(self, failed: SwitchResult, from_layout: str | None) -> SwitchResult:
        target_name = (
            self.audit.last_ready_layout(self.host.name, self.service.name, exclude=failed.layout)
            if self.audit
            else None
        )
        if target_name is None and from_layout and from_layout != failed.layout:
            target_name = from_layout  # no history: the layout that ran before is the best guess
        target = self.service.layout(target_name) if target_name else None
        if target is None:
            t0 = time.monotonic()
            self.step(failed.layout, t0, "rollback", self._no_target_words(failed.layout), rollback=True)
            return failed
        t0 = time.monotonic()
        self.step(target.name, t0, "rollback", f"rolling back to {target.name}", rollback=True)
        if failed.outcome == FAILED and self.service.engine is Engine.VLLM:
            await self.let_exit(failed.unit)
        back = await self.start(
            target, from_layout=failed.layout, forced=True, fit_json=None, t0=t0, rollback_of=failed.audit_id
        )
        return _with_rollback(failed, back)

    def _no_target_words(self, failed: str) -> str:
        """Why nothing is rolled back to: no layout was ever ready, or only the one that just failed."""
        last = self.audit.last_ready_layout(self.host.name, self.service.name) if self.audit else None
        if last == failed:
            return (f"the only layout known to have been ready is {failed}, the one that just failed; "
                    "nothing else to roll back to")  # fmt: skip
        return "no layout is known to have been ready; not rolling back"

    async def let_exit(self, unit: str | None) -> None:
        """Give a vLLM whose start failed FAILED_EXIT_S to exit on its own before it is stopped: a stop in
        its shutdown path can hang it (a real vLLM 0.32 whose engine core failed to start ignored SIGTERM
        there until systemd's 90 s TimeoutStopSec; left alone it exits 1 within seconds). SGLang's
        launcher may wait forever after a failed rank (sglang PR #20287): it is stopped at once."""
        deadline = time.monotonic() + FAILED_EXIT_S
        while unit is not None and time.monotonic() < deadline:
            try:
                if not (await self.host.services.state(unit)).is_running:
                    return
            except ConsoleError:
                return
            await asyncio.sleep(max(self.state_poll_s, 0.2))


def _with_rollback(failed: SwitchResult, back: SwitchResult) -> SwitchResult:
    return replace(failed, rollback=back)


__all__ = ["READY", "FAILED", "TIMEOUT", "REFUSED", "UNCHANGED", "SwitchResult", "switch_layout", "resolve", "lock_name"]
