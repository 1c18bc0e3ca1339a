"""Start one layout of a service and watch it to a verdict: the mechanism a switch and its rollback share.

`LayoutStarter.start` stops what runs, writes the layout's env file or drop-in (and daemon-reloads),
starts the new unit, watches it (switch_watch) and audits the attempt. It decides nothing: whether to
start at all, what the preflight says and which layout to roll back to are the switch's own choices
(switch.py), so the seam runs between deciding what to start and starting it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.config import DROP_IN, ENV_FILE, LayoutConfig, ServiceConfig
from console.domain.values import Finding, FindingClass, Phase, UnitState
from console.errors import ConsoleError, UsageError
from console.hosts.base import Host
from console.ops.status import unit_states
from console.ops.switch.events import FAILED, StepEvent, SwitchResult
from console.ops.switch.failure_text import with_advice
from console.ops.switch.layout_files import layout_file
from console.ops.switch.nodes import start_over_nodes
from console.ops.switch.start_follow import StartFollower, Verdict
from console.ops.switch.starter_protocol import EventSink

if TYPE_CHECKING:
    from console.ops.audit import AuditLog


class LayoutStarter:
    """Starts layouts of one service on one host, emitting step events and auditing each attempt."""

    def __init__(
        self,
        host: Host,
        service: ServiceConfig,
        audit: AuditLog | None,
        emit: EventSink,
        timeout_s: float,
        state_poll_s: float,
        health_poll_s: float,
    ) -> None:
        self.host = host
        self.service = service
        self.audit = audit
        self.emit = emit
        self.timeout_s = timeout_s
        self.state_poll_s = state_poll_s
        self.health_poll_s = health_poll_s

    def step(
        self,
        layout: str,
        t0: float,
        step: str,
        detail: str,
        *,
        unit: str | None = None,
        rollback: bool = False,
    ) -> None:
        """Emit one step of a start (or of its rollback), timed from `t0`."""
        self.emit(
            StepEvent(
                layout=layout,
                elapsed_s=time.monotonic() - t0,
                rollback=rollback,
                step=step,
                detail=detail,
                unit=unit,
            )
        )

    async def start(
        self,
        layout: LayoutConfig,
        *,
        from_layout: str | None,
        forced: bool,
        fit_json: dict | None,
        t0: float,
        rollback_of: int | None = None,
        states: Sequence[UnitState] | None = None,
    ) -> SwitchResult:
        """Stop what runs (`states`, when just read), start `layout`, watch it to a verdict, audit it."""
        is_rollback = rollback_of is not None
        svc, unit = self.service, self.service.unit_for(layout)
        audit_id = None
        if self.audit is not None:
            audit_id = self.audit.begin(
                host=self.host.name, service=svc.name, to_layout=layout.name, from_layout=from_layout,
                forced=forced, rollback_of=rollback_of, fit_verdict=(fit_json or {}).get("verdict"),
            )  # fmt: skip
        started_at = time.time()
        try:
            verdict = await self._start_and_watch(layout, unit, t0, is_rollback, states)
        except (asyncio.CancelledError, KeyboardInterrupt):
            if self.audit is not None and audit_id is not None:
                self.audit.finish(audit_id, outcome="interrupted", reason="the switch was cancelled")
            raise
        elapsed = time.monotonic() - t0
        result = with_advice(SwitchResult(  # a weights OOM's hint names the layouts that fit, from the first
            host=self.host.name, service=svc.name, layout=layout.name, outcome=verdict.outcome,
            reason=verdict.reason, from_layout=from_layout, unit=unit, failure=verdict.failure,
            detected_after_s=verdict.detected_after_s, elapsed_s=elapsed, phase=verdict.phase.value,
            forced=forced, fit=fit_json, audit_id=audit_id, started_at=started_at, verdict_at=verdict.verdict_at,
            port_open_s=verdict.port_open_s, http_ready_s=verdict.http_ready_s, first_token_s=verdict.first_token_s,
        ))  # fmt: skip
        failure = result.failure
        if self.audit is not None and audit_id is not None:
            self.audit.finish(
                audit_id, outcome=verdict.outcome, reason=verdict.reason,
                failure=failure.to_json() if failure else None, detected_after_s=verdict.detected_after_s,
                elapsed_s=elapsed,
            )  # fmt: skip
        return result

    async def _start_and_watch(
        self, layout: LayoutConfig, unit: str, t0: float, rollback: bool, states: Sequence[UnitState] | None
    ) -> Verdict:
        if self.service.cluster is not None:  # a service over several hosts: every node (nodes.py)
            return await start_over_nodes(self, layout, unit, t0, rollback)
        services = self.host.services
        action = "prepare the layout's file"
        try:
            # The file is built (and an env file read) before anything stops, so a refusal costs nothing.
            existing = None
            if self.service.mapping == ENV_FILE and self.service.env_file is not None:
                action = f"read {self.service.env_file}"
                existing = await services.read_file(self.service.env_file)
            try:
                written = layout_file(self.service, layout, existing)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            action = "stop the running layout"
            for state in states if states is not None else await unit_states(self.host, self.service):
                if state.is_running:
                    self.step(
                        layout.name, t0, "stop", f"stopping {state.unit}", unit=state.unit, rollback=rollback
                    )
                    await services.stop(state.unit)
            if written is not None:
                path, content = written
                action = f"write {path}"
                self.step(layout.name, t0, "write", f"writing {path}", unit=unit, rollback=rollback)
                await services.write_file(path, content)
                if self.service.mapping == DROP_IN:
                    await services.daemon_reload()
            action = f"start {unit}"  # start() clears a failed state first (systemctl reset-failed)
            cursor = None
            async for entry in services.journal(unit, follow=False, lines=1):
                cursor = entry.cursor
            self.step(layout.name, t0, "start", f"starting {unit}", unit=unit, rollback=rollback)
            await services.start(unit)
        except ConsoleError as exc:  # the host refused an action: a failed switch, said in one line
            now = time.time()
            reason = f"could not {action}: {exc}"
            failure = Finding(cls=FindingClass.UNIT_FAILED, line=str(exc), summary=reason, ts=now)
            return Verdict(FAILED, reason, failure, now, now, Phase.FAILED)
        watch = StartFollower(
            self.host, self.service, unit, layout=layout.name, emit=self.emit, started_mono=t0,
            rollback=rollback, state_poll_s=self.state_poll_s, health_poll_s=self.health_poll_s,
        )  # fmt: skip
        self.step(
            layout.name, t0, "watch", "watching journal, unit state and health", unit=unit, rollback=rollback
        )
        return await watch.run(after_cursor=cursor, timeout_s=self.timeout_s)
