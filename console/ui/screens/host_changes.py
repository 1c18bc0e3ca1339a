"""What the host screen changes on its host: a layout switch, a unit restart or a stop.

The host screen is split at this seam: `host.py` lays out the panes and routes their messages; this
mixin starts each change, runs it in the screen's one "switch" worker group under the `switching`
flag, and reports how it ended (the panel's card and a notification).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import work

from console.config import ServiceConfig
from console.domain.safe_text import shown
from console.hosts.base import Host
from console.ops.switch import FAILED, SwitchResult
from console.ops.views import ServiceView
from console.ui.messages import SwitchNews
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_pane import JournalPane
from console.ui.widgets.service_pane import ServicePane
from console.ui.widgets.switch_progress import SwitchPanel


class HostChanges:
    """Mixin of `HostScreen`: the actions that change the host, and the workers that carry them out.

    It uses the screen's panes, its `console` and `focus_journal()`; while a change runs, `switching`
    holds the screen's other changes (and its next-service key) back. The screen's `SwitchNews` handler
    hands a change's final result to `_switch_finished`.
    """

    host: Host
    service: ServiceConfig
    last_view: ServiceView | None
    switching: bool

    def action_switch_verdict(self) -> None:
        self.query_one(SwitchPanel).toggle_verdict()

    def action_dismiss_switch(self) -> None:
        if not self.switching:
            self.query_one(SwitchPanel).hide()

    def action_layouts(self) -> None:
        from console.ui.screens.picker import LayoutPicker

        if self.switching:
            self.notify("a switch is running; wait for its result", severity="warning")
            return
        self.app.push_screen(LayoutPicker(self.host, self.service, self.last_view), self._chosen)

    def request_switch(self, layout_name: str) -> None:
        """Open the confirmation for one layout (used by the command palette)."""
        from console.ui.screens.confirm import ConfirmSwitch

        if self.console.refuse_readonly("switch") or self.switching:
            return
        self.app.push_screen(ConfirmSwitch(self.host, self.service, layout_name, self.last_view), self._chosen)

    def _chosen(self, choice: tuple[str, bool] | None) -> None:
        """The picker's or the confirmation's answer: (layout, forced), or None for no switch."""
        if choice is not None:
            self.start_switch(*choice)

    def start_switch(self, layout_name: str, force: bool) -> None:
        if self.console.refuse_readonly("switch"):
            return
        layout = self.service.layout(layout_name)
        if layout is None:
            self.notify(f"{self.service.name} has no layout {layout_name!r}", severity="error")
            return
        self.switching = True
        self.query_one(GpuPane).fast = True
        self.query_one(SwitchPanel).begin(self.host.name, self.service.name, layout.name, force)
        self.query_one(JournalPane).follow_unit(self.service.unit_for(layout))
        self.focus_journal()
        self.run_switch(layout.name, force)

    @work(exclusive=True, group="switch", exit_on_error=False)
    async def run_switch(self, layout_name: str, force: bool) -> None:
        """Run the ops layer's switch; its typed events stream into the panel as messages."""
        from console.ops.switch import switch_layout

        self.query_one(SwitchPanel).fits_instead = await self.layouts_that_fit(exclude=layout_name)
        try:
            result = await switch_layout(self.host, self.service, layout_name, force=force, audit=self.console.audit,
                                         on_event=lambda ev: self.post_message(SwitchNews(self.host.name, ev)))
        except Exception as exc:  # what the ops layer did not catch shows as a failed card, never a traceback
            now = time.time()
            result = SwitchResult(host=self.host.name, service=self.service.name, layout=layout_name, outcome=FAILED,
                                  reason=str(exc) or type(exc).__name__, started_at=now, verdict_at=now)
        self.post_message(SwitchNews(self.host.name, result))

    async def layouts_that_fit(self, *, exclude: str) -> list[str]:
        """Layouts predicted to fit (for the failure card's "fits instead")."""
        from console.ops.fit_check import fit_service_layouts

        try:
            fits = await fit_service_layouts(self.host, self.service)
        except Exception:
            return []
        return [f"{lc.name} ({fit.verdict})" for lc, fit in fits
                if fit is not None and fit.verdict in ("fits", "tight") and lc.name != exclude]

    def _switch_finished(self, result: SwitchResult) -> None:
        self.switching = False
        self.query_one(GpuPane).fast = False
        self.query_one(SwitchPanel).finish(result)
        self.query_one(ServicePane).poll_now()  # health and state as they are now, not before the switch ended
        if result.outcome == "ready":
            self.notify(f"{result.layout} READY", timeout=4)
        elif result.outcome == "refused":
            self.notify(result.reason or "switch refused", severity="error", timeout=8)
        else:
            cause = result.failure.summary if result.failure is not None else result.reason
            text = f"{result.layout} {result.outcome}: {cause}"
            if result.rollback is not None:
                text += f" · rollback to {result.rollback.layout}: {result.rollback.outcome.upper()}"
            self.notify(text, severity="error", timeout=8)

    def action_restart_service(self) -> None:
        self._unit_action("restart")

    def action_stop_service(self) -> None:
        self._unit_action("stop")

    def _unit_action(self, verb: str) -> None:
        """`S` and `R` ask first, naming the unit and the outage; Cancel has the focus. `R` also brings a
        failed unit back, as `systemctl restart` does."""
        from console.ui.screens.confirm_unit import ConfirmUnitAction

        if self.console.refuse_readonly(f"service {verb}") or self.switching:
            return
        view = self.last_view
        state = view.state if view is not None else None
        acts = state is not None and (state.is_running or (verb == "restart" and state.is_failed))
        if view is None or view.unit is None or not acts:
            said = "running or failed" if verb == "restart" else "running"
            self.notify(f"no unit of {self.service.name} is {said}; nothing to {verb}", severity="warning")
            return
        unit, layout = view.unit, view.layout
        self.app.push_screen(ConfirmUnitAction(verb, self.host.name, self.service.name, unit, layout),
                             lambda go: self._unit_confirmed(verb, unit, layout) if go else None)

    def _unit_confirmed(self, verb: str, unit: str, layout: str | None) -> None:
        if verb == "stop":
            self.run_stop()
            return
        # A restart is watched like a switch: the panel shows its start, and it ends READY or FAILED.
        self.switching = True
        self.query_one(GpuPane).fast = True
        panel = self.query_one(SwitchPanel)
        panel.begin(self.host.name, self.service.name, layout or unit, False)
        # The unit is the one the host reports running: host text, so a Text, never markup.
        panel.border_title = Text(shown(f"restart {self.service.name} on {self.host.name}: {unit}"))
        self.query_one(JournalPane).follow_unit(unit)
        self.run_restart(layout or unit)

    @work(exclusive=True, group="switch", exit_on_error=False)
    async def run_restart(self, name: str) -> None:
        from console.ops.switch import restart_service

        try:
            result = await restart_service(self.host, self.service, audit=self.console.audit,
                                           on_event=lambda ev: self.post_message(SwitchNews(self.host.name, ev)))
        except Exception as exc:  # shown as a failed card, never a traceback
            now = time.time()
            result = SwitchResult(host=self.host.name, service=self.service.name, layout=name, outcome=FAILED,
                                  reason=str(exc) or type(exc).__name__, started_at=now, verdict_at=now,
                                  extra={"action": "restart"})
        self.post_message(SwitchNews(self.host.name, result))

    @work(group="unit-action", exit_on_error=False)
    async def run_stop(self) -> None:
        from console.ops.switch import NOTHING, STOPPED, stop_service

        try:
            result = await stop_service(self.host, self.service, audit=self.console.audit)
        except Exception as exc:
            self.notify(f"stop {self.service.name} failed: {exc}", severity="error")
            return
        ok = result.outcome in (STOPPED, NOTHING)
        kept = f" · evidence kept: {result.evidence}" if result.evidence is not None else ""
        self.notify(f"{result.outcome.upper()}: {result.reason}{kept}", severity="information" if ok else "error",
                    timeout=10 if kept else 6)
        self.query_one(ServicePane).poll_now()
