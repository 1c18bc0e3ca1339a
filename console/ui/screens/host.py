"""A host's screen: service, GPU memory, the engine's own numbers, the switch panel (while one runs) and the
journal."""

from __future__ import annotations

import time

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from console.config import ServiceConfig
from console.hosts.base import Host
from console.hosts.metrics import metrics_reader
from console.ops.events import FAILED, PhaseEvent, SwitchResult
from console.ops.views import ServiceView, service_view
from console.ui.keys import bindings, changing_actions, scope_actions
from console.ui.messages import SwitchNews
from console.ui.reach import ReachesConsole
from console.ui.widgets.engine_pane import EnginePane
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_pane import JournalPane, PhaseSeen
from console.ui.widgets.service_pane import ServicePane, ServiceUpdated
from console.ui.widgets.switch_progress import SwitchPanel
from console.ui.worker_errors import NotifiesWorkerErrors

CHANGING = changing_actions("host")
#: Below this many rows a running or finished switch's panel takes the top panes' place.
SHORT_ROWS = 40
JOURNAL = scope_actions("journal")


class HostScreen(ReachesConsole, NotifiesWorkerErrors, Screen[None]):
    """Everything about one host; its panes own their polls, the screen owns the switch."""

    # The journal's keys belong to the screen, as priority bindings: they work whatever widget has
    # focus, and each runs before the next key is dispatched, so `/` then typed text reaches the
    # filter input even when the keys arrive in one burst (tmux send-keys, a paste, a fast typist).
    BINDINGS = bindings("journal", priority=True, via="journal") + bindings("host")

    def __init__(self, host: Host) -> None:
        super().__init__(name=f"host:{host.name}")
        self.host = host
        self.service_index = 0
        self.last_view: ServiceView | None = None
        self.switching = False

    @property
    def service(self) -> ServiceConfig:
        return self.host.config.services[self.service_index]

    def compose(self) -> ComposeResult:
        app = self.console
        ui, clock, audit, fits = app.ui_config, app.clock, app.audit, app.fits
        host, service = self.host, self.service

        async def fetch() -> ServiceView:
            gpu_pane, service_pane = self.query_one(GpuPane), self.query_one(ServicePane)
            fresh, service_pane.fresh_health = service_pane.fresh_health, False
            return await service_view(host, service, fits=fits, audit=audit, snapshot=gpu_pane.snapshot,
                                      fresh_health=fresh)

        yield Header()
        with Horizontal(id="top"):
            yield ServicePane(host.name, fetch, refresh_s=ui.refresh_s, clock=clock, busy=lambda: self.switching,
                              id="service-pane")
            yield GpuPane(host, refresh_s=ui.refresh_s, history_s=ui.history_s, clock=clock, id="gpu-pane")
        yield EnginePane(metrics_reader(host.probes.get(service.name), service.engine), refresh_s=ui.refresh_s,
                         clock=clock, id="engine-pane")
        yield SwitchPanel(clock=clock, id="switch-panel")
        yield JournalPane(host, engine=service.engine, line_cap=ui.line_cap, id="journal-pane")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"serve-console · {self.host.name}"
        self._set_sub_title()
        self.focus_journal()

    def on_resize(self) -> None:
        self.set_class(self.size.height < SHORT_ROWS, "-short")

    def _set_sub_title(self) -> None:
        self.sub_title = self.service.name + (" · read-only" if self.console.readonly else "")

    def on_screen_resume(self) -> None:
        # A modal (picker, confirmation, help, palette) closed: keys go to the journal again.
        self.focus_journal()

    def focus_journal(self) -> None:
        """Focus the journal view now (not after a refresh) unless a widget of this screen has focus."""
        focused = self.focused
        if focused is None or not focused.is_attached or not focused.display:
            views = self.query("#journal-view")
            if views:
                self.set_focus(views.first())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHANGING and self.console.readonly:
            return False
        if action in ("journal", "back") and isinstance(self.focused, Input):
            return False  # the filter's text input keeps its keys (`/`, `n`, `e` are text there; Esc closes it)
        return True

    # -- data flow between panes ---------------------------------------------------------------------
    @on(ServiceUpdated)
    def _service_updated(self, event: ServiceUpdated) -> None:
        self.last_view = event.view
        self.query_one(GpuPane).set_gpus_in_use(event.view.gpus_used, event.view.expected_mib)
        if not self.switching:
            self.query_one(JournalPane).follow_unit(event.view.unit)

    @on(PhaseSeen)
    def _phase_seen(self, event: PhaseSeen) -> None:
        # Both come from the host's one journal reading: the pane's PhaseSeen outside a switch, the
        # switch's own phase events (which name its start, not a straggler of another unit) during one.
        if not self.switching and (self.last_view is None or event.unit == self.last_view.unit):
            self.query_one(ServicePane).set_phase(event.event.phase)

    # -- journal keys (bound on the screen, so they work whatever has focus; the pane does the work) ----
    def action_journal(self, name: str) -> None:
        if name in JOURNAL:  # called at once, not queued: the next key of a burst must find its effect
            getattr(self.query_one(JournalPane), f"action_{name}")()

    # -- actions -------------------------------------------------------------------------------------
    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_toggle_processes(self) -> None:
        self.query_one(GpuPane).toggle_processes()

    def action_dismiss_switch(self) -> None:
        if not self.switching:
            self.query_one(SwitchPanel).hide()

    def action_next_service(self) -> None:
        if len(self.host.config.services) > 1 and not self.switching:
            self.service_index = (self.service_index + 1) % len(self.host.config.services)
            self.last_view = None
            self._set_sub_title()
            self.refresh(recompose=True)
            self.call_after_refresh(self.focus_journal)

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

    @on(SwitchNews)
    def _switch_news(self, message: SwitchNews) -> None:
        if message.final is not None:
            self._switch_finished(message.final)
            return
        panel = self.query_one(SwitchPanel)
        panel.on_switch_event(message.event)
        unit = panel.unit_to_follow()
        if unit is not None:
            self.query_one(JournalPane).follow_unit(unit)
        if isinstance(message.event, PhaseEvent):  # during a switch its watcher relays the hub's phases
            self.query_one(ServicePane).set_phase(message.event.phase)

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

    def action_probe(self) -> None:
        from console.ui.screens.probe import ProbeScreen

        if self.console.refuse_readonly("probe") or self.switching:
            return
        if self.last_view is None or self.last_view.layout is None:
            self.notify("no layout is running; nothing to probe", severity="warning")
            return
        self.app.push_screen(ProbeScreen(self.host, self.service, self.last_view.layout))

    def action_explore(self) -> None:
        from console.ui.screens.explore import ExploreScreen

        if self.console.refuse_readonly("explore") or self.switching:
            return
        self.app.push_screen(ExploreScreen(self.host, self.service))

    def action_restart_service(self) -> None:
        self._unit_action("restart")

    def action_stop_service(self) -> None:
        self._unit_action("stop")

    def _unit_action(self, verb: str) -> None:
        """`S` and `R` ask first, naming the unit and the outage; Cancel has the focus."""
        from console.ui.screens.confirm_unit import ConfirmUnitAction

        if self.console.refuse_readonly(f"service {verb}") or self.switching:
            return
        view = self.last_view
        if view is None or view.unit is None or view.state is None or not view.state.is_running:
            self.notify(f"no unit of {self.service.name} is running; nothing to {verb}", severity="warning")
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
        panel.border_title = f"restart {self.service.name} on {self.host.name}: {unit}"
        self.query_one(JournalPane).follow_unit(unit)
        self.run_restart(layout or unit)

    @work(exclusive=True, group="switch", exit_on_error=False)
    async def run_restart(self, name: str) -> None:
        from console.ops.service_control import restart_service

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
        from console.ops.service_control import NOTHING, STOPPED, stop_service

        try:
            result = await stop_service(self.host, self.service, audit=self.console.audit)
        except Exception as exc:
            self.notify(f"stop {self.service.name} failed: {exc}", severity="error")
            return
        ok = result.outcome in (STOPPED, NOTHING)
        self.notify(f"{result.outcome.upper()}: {result.reason}", severity="information" if ok else "error",
                    timeout=6)
        self.query_one(ServicePane).poll_now()
