"""Fleet overview: a row per host with reachability, data age, units, layout, GPU memory and health."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Sequence

from rich.style import Style
from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import DataTable

from console.domain.safe_text import shown as inert
from console.ops.views import HostSummary
from console.ui.keys import bindings
from console.ui.widgets.service_pane import age_text
from console.ui.worker_errors import NotifiesWorkerErrors

COLUMNS = ("host", "link", "data age", "units", "layout", "GPU memory", "health")
#: Through Prometheus: no units or layouts (that needs SSH), the engines' own figures instead.
PROMETHEUS_COLUMNS = ("host", "link", "data age", "engines", "GPU memory", "health")
WIDTH = {"host": 14, "link": 5, "data age": 11, "units": 10, "layout": 22, "engines": 38, "GPU memory": 26,
         "health": 18}


def failed_health(health: str) -> str:
    """A failed host's health cell: a node's state is what matters, so it leads (`FAILED: dead node`)
    and the head's own answer (`ready`), which hides it, is left out to fit the column."""
    nodes = re.findall(r"\((\w+) node\)", health)
    if nodes:
        return "FAILED: " + ", ".join(f"{state} node" for state in dict.fromkeys(nodes))
    return f"FAILED {health}"


def cell(text: str, style: Style | str = "") -> Text:
    """Host text for a table cell: redacted, made printable, and a Text (a str cell is read as markup)."""
    return Text(inert(text), style=style)


class FleetTable(NotifiesWorkerErrors, DataTable):
    """Polls every host at once in its own worker; a slow or dead host never holds up the others."""

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {"fleet--ok", "fleet--bad", "fleet--warn", "fleet--dim"}
    BINDINGS = bindings("fleet")  # on the table itself, so Enter shows in the footer

    class HostChosen(Message):
        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, hosts: Sequence[str], fetch: Callable[[str], Awaitable[HostSummary]], *,
                 refresh_s: float, clock: Callable[[], float], id: str | None = None,
                 fetch_all: Callable[[], Awaitable[list[HostSummary]]] | None = None) -> None:
        """`fetch` asks one host; `fetch_all`, when given, reads every row at once instead (Prometheus),
        adding rows for hosts it knows that `hosts` does not."""
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.host_names = list(hosts)
        self.fetch = fetch
        self.fetch_all = fetch_all
        self.column_names = PROMETHEUS_COLUMNS if fetch_all is not None else COLUMNS
        self.refresh_s = refresh_s
        self.clock = clock
        self.summaries: dict[str, HostSummary] = {}
        self.last_ok: dict[str, HostSummary] = {}

    def on_mount(self) -> None:
        for name in self.column_names:
            self.add_column(name, key=name, width=WIDTH[name])
        for host in self.host_names:
            self._add_host_row(host)
        self.poll()

    def _add_host_row(self, host: str) -> None:
        self.add_row(cell(host), "connecting", *["-"] * (len(self.column_names) - 2), key=host)

    @work(exclusive=True, group="fleet-poll", exit_on_error=False)
    async def poll(self) -> None:
        while True:
            if self.screen.is_current or not self.summaries:
                if self.fetch_all is not None:
                    await self._poll_all(self.fetch_all)
                else:
                    await asyncio.gather(*(self._poll_one(h) for h in self.host_names))
            await asyncio.sleep(self.refresh_s)

    async def _poll_all(self, fetch_all: Callable[[], Awaitable[list[HostSummary]]]) -> None:
        try:
            async with asyncio.timeout(max(5.0, 3 * self.refresh_s)):
                summaries = await fetch_all()
        except Exception as exc:  # the source is down: every row keeps its last data, marked stale
            why = str(exc) or type(exc).__name__
            summaries = [HostSummary(h, self.clock(), reachable=False, error=why) for h in self.host_names]
        for summary in summaries:
            if summary.host not in self.host_names:
                self.host_names.append(summary.host)
                self._add_host_row(summary.host)
            self.show(summary)

    async def _poll_one(self, host: str) -> None:
        try:
            async with asyncio.timeout(max(5.0, 3 * self.refresh_s)):
                summary = await self.fetch(host)
        except Exception as exc:
            summary = HostSummary(host, self.clock(), reachable=False, error=str(exc) or type(exc).__name__)
        self.show(summary)

    def show(self, summary: HostSummary) -> None:
        """Update one host's row (tests feed fixed summaries through here)."""
        self.summaries[summary.host] = summary
        if summary.reachable:
            self.last_ok[summary.host] = summary
        # A host that stops answering keeps its last known data, marked stale with its age.
        shown = summary if summary.reachable else self.last_ok.get(summary.host, summary)
        # partial: colours only. A cell's background comes from the table (focused or not) when it is
        # drawn, not from whatever the table's background was when the row was filled in.
        s = functools.partial(self.get_component_rich_style, partial=True)
        if shown.reachable:
            age: float | None = self.clock() - shown.taken_at
        else:
            age = None if summary.last_ok_at is None else self.clock() - summary.last_ok_at
        stale = not summary.reachable or (age is not None and age > max(3 * self.refresh_s, 5.0))
        if summary.stale is not None:  # the source knows (Prometheus data is up to a scrape interval old)
            stale = summary.stale or not summary.reachable
        up_text = "prom" if summary.source == "prometheus" else "up"
        link = Text(up_text, style=s("fleet--ok")) if summary.reachable else Text("DOWN", style=s("fleet--bad"))
        age_cell = Text(("STALE " if stale else "") + age_text(age), style=s("fleet--warn") if stale else "")
        # A service's units are alternatives (one per layout): "1/4 up" read as three down.
        units = f"{shown.units_active} running" if shown.units_total else "-"
        if shown.gpu_total_mib:
            gib = 1024
            mem = f"{shown.gpu_used_mib / gib:,.0f}/{shown.gpu_total_mib / gib:,.0f} GiB"
            if shown.gpus_busy is not None and shown.gpu_count:
                mem += f" · {shown.gpus_busy}/{shown.gpu_count} busy"
        else:
            mem = "-"
        health_style = s("fleet--bad") if shown.failed else s("fleet--ok") if shown.health == "ready" else ""
        health = cell(shown.health if not shown.failed else failed_health(shown.health), health_style)
        if shown.stalled:  # processes alive, /health maybe 200, no progress: said before the health
            health = cell(f"STALLED {', '.join(shown.stalled)} · {shown.health}", s("fleet--bad"))
        if not summary.reachable:
            health = cell(summary.error or "unreachable", s("fleet--bad"))
        # A str cell is markup to a DataTable: every cell a host's words reach is a sanitised Text.
        cells = {"host": cell(summary.host), "link": link, "data age": age_cell, "units": units,
                 "layout": cell(shown.layouts), "engines": cell(shown.engines), "GPU memory": mem, "health": health}
        for column in self.column_names:
            self.update_cell(summary.host, column, cells[column])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.HostChosen(str(event.row_key.value)))

    def action_open_host(self) -> None:
        if self.row_count:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
            if key.value is not None:
                self.post_message(self.HostChosen(str(key.value)))
