"""The fleet overview: one row per host; Enter opens the host's screen."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from console.ops.fleet import PrometheusFleet, fleet_summary
from console.ops.views import HostSummary, host_summary
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings
from console.ui.widgets.fleet_table import FleetTable


class FleetScreen(ReachesConsole, Screen[None]):
    """Every host at a glance, polled together; a host that is down shows as such with its data age."""

    BINDINGS = bindings("fleet")

    prometheus: PrometheusFleet | None = None
    """With `[fleet] prometheus`: every row from there, and no host is asked over SSH until opened."""

    def compose(self) -> ComposeResult:
        app = self.console
        hosts = app.hosts

        async def fetch(name: str) -> HostSummary:
            return await host_summary(hosts[name], app.clock, audit=app.audit, serving=app.serving)

        fetch_all = None
        if app.config.fleet is not None:
            self.prometheus = prometheus = PrometheusFleet(app.config.fleet, app.config.hosts)

            async def fetch_all() -> list[HostSummary]:
                rows = await prometheus.rows()
                now = app.clock()
                return [fleet_summary(row, now) for row in rows]

        yield Header()
        yield FleetTable(list(hosts), fetch, refresh_s=app.ui_config.refresh_s, clock=app.clock, id="fleet-table",
                         fetch_all=fetch_all)
        yield Footer()

    async def on_unmount(self) -> None:
        if self.prometheus is not None:
            await self.prometheus.close()

    def on_mount(self) -> None:
        self.title = "serve-console · fleet"
        self.query_one(FleetTable).focus()

    @on(FleetTable.HostChosen)
    def _open(self, event: FleetTable.HostChosen) -> None:
        if event.host not in self.console.hosts:  # seen through Prometheus only
            self.notify(f"{event.host} is not in hosts.toml: add it there to open it", severity="warning")
            return
        self.console.open_host(event.host)

    def action_open_host(self) -> None:
        self.query_one(FleetTable).action_open_host()
