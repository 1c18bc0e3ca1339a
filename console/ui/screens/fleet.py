"""The fleet overview: one row per host; Enter opens the host's screen."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from console.ops.views import HostSummary, host_summary
from console.ui.keys import bindings
from console.ui.reach import ReachesConsole
from console.ui.widgets.fleet_table import FleetTable


class FleetScreen(ReachesConsole, Screen[None]):
    """Every host at a glance, polled together; a host that is down shows as such with its data age."""

    BINDINGS = bindings("fleet")

    def compose(self) -> ComposeResult:
        app = self.console
        hosts = app.hosts

        async def fetch(name: str) -> HostSummary:
            return await host_summary(hosts[name], app.clock, audit=app.audit)

        yield Header()
        yield FleetTable(list(hosts), fetch, refresh_s=app.ui_config.refresh_s, clock=app.clock, id="fleet-table")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "serve-console · fleet"
        self.query_one(FleetTable).focus()

    @on(FleetTable.HostChosen)
    def _open(self, event: FleetTable.HostChosen) -> None:
        self.console.open_host(event.host)

    def action_open_host(self) -> None:
        self.query_one(FleetTable).action_open_host()
