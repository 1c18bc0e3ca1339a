"""The fleet overview: one row per host; Enter opens the host's screen."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from console.ui.fetch import fetch_host_summary
from console.ui.keys import bindings
from console.ui.widgets.fleet_table import FleetTable


class FleetScreen(Screen[None]):
    """Every host at a glance, polled together; a host that is down shows as such with its data age."""

    BINDINGS = bindings("fleet")

    def compose(self) -> ComposeResult:
        app = self.app
        hosts = app.hosts  # type: ignore[attr-defined]

        async def fetch(name: str):
            return await fetch_host_summary(hosts[name], app.clock, audit=app.audit)  # type: ignore[attr-defined]

        yield Header()
        yield FleetTable(list(hosts), fetch, refresh_s=app.ui_config.refresh_s,  # type: ignore[attr-defined]
                         clock=app.clock, id="fleet-table")  # type: ignore[attr-defined]
        yield Footer()

    def on_mount(self) -> None:
        self.title = "serve-console · fleet"
        self.query_one(FleetTable).focus()

    @on(FleetTable.HostChosen)
    def _open(self, event: FleetTable.HostChosen) -> None:
        self.app.open_host(event.host)  # type: ignore[attr-defined]

    def action_open_host(self) -> None:
        self.query_one(FleetTable).action_open_host()
