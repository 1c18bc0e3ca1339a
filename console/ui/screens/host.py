"""A host's screen: service, GPU memory, the switch panel (while one runs) and the journal."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ui.fetch import fetch_service_view
from console.ui.keys import bindings, changing_actions, scope_actions
from console.ui.messages import SwitchEvent, SwitchFinished
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_pane import JournalPane, PhaseSeen
from console.ui.widgets.service_pane import ServicePane, ServiceUpdated, ServiceView
from console.ui.widgets.switch_progress import SwitchPanel
from console.ui.worker_errors import NotifiesWorkerErrors

CHANGING = changing_actions("host")
JOURNAL = scope_actions("journal")


class HostScreen(NotifiesWorkerErrors, Screen[None]):
    """Everything about one host; its panes own their polls, the screen owns the switch."""

    # The journal's keys belong to the screen, as priority bindings: they work whatever widget has
    # focus, and each runs before the next key is dispatched, so `/` then typed text reaches the
    # filter input even when the keys arrive in one burst (tmux send-keys, a paste, a fast typist).
    BINDINGS = bindings("journal", priority=True) + bindings("host")

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
        app = self.app
        ui = app.ui_config  # type: ignore[attr-defined]
        clock = app.clock  # type: ignore[attr-defined]
        host, service = self.host, self.service

        audit = app.audit  # type: ignore[attr-defined]

        async def fetch() -> ServiceView:
            gpu_pane = self.query_one(GpuPane)
            return await fetch_service_view(host, service, clock, audit=audit, snapshot=gpu_pane.snapshot)

        yield Header()
        with Horizontal(id="top"):
            yield ServicePane(host.name, fetch, refresh_s=ui.refresh_s, clock=clock, id="service-pane")
            yield GpuPane(host, refresh_s=ui.refresh_s, history_s=ui.history_s, clock=clock, id="gpu-pane")
        yield SwitchPanel(clock=clock, id="switch-panel")
        yield JournalPane(host, engine=service.engine, line_cap=ui.line_cap, id="journal-pane")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"serve-console · {self.host.name}"
        self.sub_title = self.service.name + (" · read-only" if self.app.readonly else "")  # type: ignore[attr-defined]
        self.focus_journal()

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
        if action in CHANGING and self.app.readonly:  # type: ignore[attr-defined]
            return False
        if action in JOURNAL and isinstance(self.focused, Input):
            return False  # the filter's text input keeps its keys (`/`, `n`, `e` are text there)
        return True

    # -- data flow between panes ---------------------------------------------------------------------
    @on(ServiceUpdated)
    def _service_updated(self, event: ServiceUpdated) -> None:
        self.last_view = event.view
        self.query_one(GpuPane).set_gpus_in_use(event.view.gpus_used)
        if not self.switching:
            self.query_one(JournalPane).follow_unit(event.view.unit)

    @on(PhaseSeen)
    def _phase_seen(self, event: PhaseSeen) -> None:
        if self.last_view is None or event.unit == self.last_view.unit or self.switching:
            self.query_one(ServicePane).set_phase(event.event.phase)

    # -- journal actions (keys on the screen, work done by the pane) ---------------------------------
    def _journal(self) -> JournalPane:
        return self.query_one(JournalPane)

    def action_next_finding(self) -> None:
        self._journal().action_next_finding()

    def action_prev_finding(self) -> None:
        self._journal().action_prev_finding()

    def action_filter(self) -> None:
        self._journal().action_filter()

    def action_search(self) -> None:
        self._journal().action_search()

    def action_next_match(self) -> None:
        self._journal().action_next_match()

    def action_prev_match(self) -> None:
        self._journal().action_prev_match()

    def action_copy_line(self) -> None:
        self._journal().action_copy_line()

    def action_follow(self) -> None:
        self._journal().action_follow()

    def action_clear_filter(self) -> None:
        self._journal().action_clear_filter()

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
            self.sub_title = self.service.name + (" · read-only" if self.app.readonly else "")  # type: ignore[attr-defined]
            self.refresh(recompose=True)
            self.call_after_refresh(self.focus_journal)

    def action_layouts(self) -> None:
        from console.ui.screens.picker import LayoutPicker

        if self.switching:
            self.notify("a switch is running; wait for its result", severity="warning")
            return
        self.app.push_screen(LayoutPicker(self.host, self.service, self.last_view), self._picked)

    def request_switch(self, layout_name: str) -> None:
        """Open the confirmation for one layout (used by the command palette)."""
        from console.ui.screens.confirm import ConfirmSwitch

        if self.app.refuse_readonly("switch") or self.switching:  # type: ignore[attr-defined]
            return
        self.app.push_screen(ConfirmSwitch(self.host, self.service, layout_name, self.last_view), self._confirmed)

    def _picked(self, choice: tuple[str, bool] | None) -> None:
        if choice is not None:
            self.start_switch(*choice)

    def _confirmed(self, choice: tuple[str, bool] | None) -> None:
        if choice is not None:
            self.start_switch(*choice)

    def start_switch(self, layout_name: str, force: bool) -> None:
        if self.app.refuse_readonly("switch"):  # type: ignore[attr-defined]
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
        """Run the ops layer's switch; its events stream into the panel as messages."""
        from console.ui.switch_runner import run_switch

        self.query_one(SwitchPanel).fits_instead = await self.layouts_that_fit(exclude=layout_name)
        result = await run_switch(self.host, self.service, layout_name, force=force,
                                  post=lambda ev: self.post_message(SwitchEvent(self.host.name, ev)),
                                  audit=self.app.audit)  # type: ignore[attr-defined]
        self.post_message(SwitchFinished(self.host.name, result))

    async def layouts_that_fit(self, *, exclude: str) -> list[str]:
        """Layouts predicted to fit (for the failure card's "fits instead")."""
        from console.ops.fit_check import fit_service_layouts

        try:
            fits = await fit_service_layouts(self.host, self.service)
        except Exception:
            return []
        return [f"{lc.name} ({fit.verdict})" for lc, fit in fits
                if fit is not None and fit.verdict in ("fits", "tight") and lc.name != exclude]

    @on(SwitchEvent)
    def _switch_event(self, message: SwitchEvent) -> None:
        panel = self.query_one(SwitchPanel)
        panel.on_switch_event(message.event)
        unit = panel.unit_to_follow(self.service)
        if unit is not None:
            self.query_one(JournalPane).follow_unit(unit)
        if message.event.get("event") == "phase":
            try:
                from console.domain.models import Phase

                self.query_one(ServicePane).set_phase(Phase(message.event.get("phase")))
            except ValueError:
                pass

    @on(SwitchFinished)
    def _switch_finished(self, message: SwitchFinished) -> None:
        self.switching = False
        self.query_one(GpuPane).fast = False
        self.query_one(SwitchPanel).finish(message.result)
        self.query_one(ServicePane).poll_now()  # health and state as they are now, not before the switch ended
        outcome = message.result.get("outcome")
        rollback = message.result.get("rollback") or {}
        if outcome == "ready":
            self.notify(f"{message.result.get('layout', '')} READY", timeout=4)
        elif outcome == "refused":
            self.notify(message.result.get("reason") or "switch refused", severity="error", timeout=8)
        else:
            failure = message.result.get("failure") or {}
            cause = failure.get("summary") or message.result.get("reason") or ""
            text = f"{message.result.get('layout')} {outcome}: {cause}"
            if rollback:
                text += f" · rollback to {rollback.get('layout')}: {str(rollback.get('outcome')).upper()}"
            self.notify(text, severity="error", timeout=8)

    def action_restart_service(self) -> None:
        self._unit_action("restart")

    def action_stop_service(self) -> None:
        self._unit_action("stop")

    def _unit_action(self, verb: str) -> None:
        if self.app.refuse_readonly(f"service {verb}") or self.switching:  # type: ignore[attr-defined]
            return
        unit = self.last_view.unit if self.last_view else None
        if unit is None:
            self.notify("no unit to act on yet", severity="warning")
            return
        self._run_unit_action(verb, unit)

    @work(group="unit-action", exit_on_error=False)
    async def _run_unit_action(self, verb: str, unit: str) -> None:
        try:
            await getattr(self.host.services, verb)(unit)
        except Exception as exc:
            self.notify(f"{verb} {unit} failed: {exc}", severity="error")
        else:
            self.notify(f"{verb} {unit}: done", timeout=3)
