"""The alerts screen (`A`): what the watch daemon raised, when, and when it resolved, newest first.

It reads the state file the daemon writes (the audit log's file), every few seconds, in a worker the
screen owns; the daemon itself runs elsewhere (`serve-console watch`, a systemd service).
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from console.domain.alerts import Alert
from console.domain.safe_text import shown
from console.ops.watch import AlertStore, open_alert_store
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings

#: Incidents shown (newest first); `serve-console alerts` lists them all.
SHOWN_ALERTS = 500
REFRESH_S = 3.0
COLUMNS = ("state", "alert", "severity", "where", "fired", "resolved", "summary")


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%m-%d %H:%M:%S", time.localtime(ts))


def alert_row(alert: Alert) -> tuple[Text, ...]:
    """One alert as the table's cells (host text as plain, sanitised Text)."""
    where = "/".join(v for v in (alert.label("host"), alert.label("service")) if v)
    if alert.label("unit"):
        where += f" {alert.label('unit')}"
    state = Text("FIRING", style="bold red") if alert.firing else Text("resolved", style="green")
    return (state, Text(shown(alert.label("alertname"))), Text(shown(alert.label("severity"))), Text(shown(where)),
            Text(_when(alert.starts_at)), Text(_when(alert.ends_at)), Text(shown(alert.annotation("summary"))))


class AlertsScreen(ReachesConsole, Screen[None]):
    """The watch daemon's alerts from the state file; Esc goes back."""

    BINDINGS = bindings("alerts")

    def __init__(self) -> None:
        super().__init__()
        self.store: AlertStore | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="alerts-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="alerts-note")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "serve-console · alerts"
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        table.focus()
        self.read_alerts()
        self.set_interval(REFRESH_S, self.read_alerts)

    @work(exclusive=True, group="alerts-read", exit_on_error=False)
    async def read_alerts(self) -> None:
        try:
            alerts, queued, counters = await asyncio.to_thread(self._read)
        except Exception as exc:  # a damaged or unwritable state file: one line, the screen stays
            self.query_one("#alerts-note", Static).update(Text(shown(str(exc))))
            return
        table = self.query_one(DataTable)
        table.clear()
        for alert in alerts:
            table.add_row(*alert_row(alert), key=str(alert.id))
        firing = sum(1 for a in alerts if a.firing)
        note = f"{firing} firing, {len(alerts) - firing} resolved (newest {SHOWN_ALERTS} shown); {queued} deliveries queued"
        note += "".join(f"; {name} {value}" for name, value in counters.items())
        if not alerts:
            note = "no alerts recorded: serve-console watch (the daemon) records them in this state file"
        self.query_one("#alerts-note", Static).update(Text(shown(note)))

    def _read(self) -> tuple[list[Alert], int, dict[str, int]]:
        if self.store is None:
            audit = self.console.audit
            self.store = open_alert_store(audit.path if audit is not None else None)
        return self.store.alerts(limit=SHOWN_ALERTS), self.store.queued(), self.store.counters()

    def on_unmount(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def action_close(self) -> None:
        self.app.pop_screen()
