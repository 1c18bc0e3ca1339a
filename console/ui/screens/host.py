"""A host's screen: service, GPU memory, the engine's own numbers, the switch panel (while one runs) and the
journal.

This module lays out the panes, keeps the focus on the journal and routes the panes' messages; what the
screen changes on the host (switch, restart, stop) lives in `host_changes.HostChanges`, mixed in here.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Header, Input

from console.config import ServiceConfig
from console.hosts.base import Host
from console.hosts.endpoints import metrics_reader
from console.ops.switch import PhaseEvent
from console.ops.views import ServiceView, service_view
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings, changing_actions, scope_actions
from console.ui.messages import SwitchNews
from console.ui.screens.host_changes import HostChanges
from console.ui.widgets.engine_pane import EnginePane
from console.ui.widgets.footer import ConsoleFooter
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_pane import JournalPane, PhaseSeen
from console.ui.widgets.service_pane import ServicePane, ServiceUpdated
from console.ui.widgets.switch_progress import SwitchPanel
from console.ui.worker_errors import NotifiesWorkerErrors

CHANGING = changing_actions("host")
#: Below this many rows (120x40 and shorter) a switch's panel takes the engine pane's place (the service
#: and GPU panes stay).
SHORT_ROWS = 41
#: Below this many rows (80x24) the top panes and the journal give up rows too.
TINY_ROWS = 28
#: Below this many columns the failure card goes above the switch's steps instead of beside them.
NARROW_COLUMNS = 120
#: Below this many columns (80x24) the service pane gives the GPU pane some of its width.
SLIM_COLUMNS = 100
JOURNAL = scope_actions("journal")


class HostScreen(ReachesConsole, NotifiesWorkerErrors, HostChanges, Screen[None]):
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
    def services(self) -> tuple[ServiceConfig, ...]:
        """The host's services, then those of other hosts it is a node of (a worker host has only these)."""
        return (*self.host.config.services, *self.host.config.node_of)

    @property
    def service(self) -> ServiceConfig:
        return self.services[self.service_index]

    def compose(self) -> ComposeResult:
        app = self.console
        ui, clock, audit, fits = app.ui_config, app.clock, app.audit, app.fits
        host, service = self.host, self.service

        async def fetch() -> ServiceView:
            gpu_pane, service_pane = self.query_one(GpuPane), self.query_one(ServicePane)
            fresh, service_pane.fresh_health = service_pane.fresh_health, False
            return await service_view(host, service, fits=fits, audit=audit, snapshot=gpu_pane.snapshot,
                                      fresh_health=fresh, serving=app.serving)

        yield Header()
        with Horizontal(id="top"):
            yield ServicePane(host.name, fetch, refresh_s=ui.refresh_s, clock=clock, busy=lambda: self.switching,
                              id="service-pane")
            yield GpuPane(host, refresh_s=ui.refresh_s, history_s=ui.history_s, clock=clock, id="gpu-pane")
        yield EnginePane(metrics_reader(host.probes.get(service.name), service.engine), refresh_s=ui.refresh_s,
                         clock=clock, id="engine-pane")
        yield SwitchPanel(clock=clock, id="switch-panel")
        yield JournalPane(host, engine=service.engine, line_cap=ui.line_cap, id="journal-pane")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.title = f"serve-console · {self.host.name}"
        self._set_sub_title()
        self.focus_journal()

    def on_resize(self) -> None:
        self.set_class(self.size.height < SHORT_ROWS, "-short")
        self.set_class(self.size.height < TINY_ROWS, "-tiny")
        self.set_class(self.size.width < NARROW_COLUMNS, "-narrow")
        self.set_class(self.size.width < SLIM_COLUMNS, "-slim")

    def _set_sub_title(self) -> None:
        node = ""
        if self.service in self.host.config.node_of and self.service.cluster is not None:  # a worker host
            nodes = self.service.cluster.nodes
            node = f" · node-rank {nodes.index(self.host.name)} of {nodes[0]}"
        self.sub_title = self.service.name + node + (" · read-only" if self.console.readonly else "")

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
        view = event.view
        per_node = None if view.gpus_used is None else view.gpus_used // max(view.node_count, 1)
        self.query_one(GpuPane).set_gpus_in_use(per_node, view.expected_mib, nodes=view.node_count)
        if not self.switching:
            self.query_one(JournalPane).follow_unit(event.view.unit)

    @on(PhaseSeen)
    def _phase_seen(self, event: PhaseSeen) -> None:
        # Both come from the host's one journal reading: the pane's PhaseSeen outside a switch, the
        # switch's own phase events (which name its start, not a straggler of another unit) during one.
        if not self.switching and (self.last_view is None or event.unit == self.last_view.unit):
            self.query_one(ServicePane).set_phase(event.event.phase)

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

    def action_next_service(self) -> None:
        if len(self.services) > 1 and not self.switching:
            self.service_index = (self.service_index + 1) % len(self.services)
            self.last_view = None
            self._set_sub_title()
            self.refresh(recompose=True)
            self.call_after_refresh(self.focus_journal)

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
