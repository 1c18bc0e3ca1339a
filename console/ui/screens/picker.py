"""The layout picker: every layout of the service with GPUs used, the predicted fit, the predicted tok/s
(`~`: per user at c=1 and aggregate at c=64, calibrated on the host's stored probes) and the last
measured tok/s."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from console.config import ServiceConfig
from console.domain.safe_text import shown
from console.hosts.base import Host
from console.ops.speed_check import HIGH_CONCURRENCY
from console.ops.views import ServiceView
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings, changing_actions
from console.ui.worker_errors import NotifiesWorkerErrors

CHANGING = changing_actions("picker")
PREDICTED_HEADER = f"~c1 c{HIGH_CONCURRENCY}"
PREDICTED_WIDTH = 10


def fit_cells(fit: Any) -> tuple[str, str, str, str]:
    """GPUs, weights per GPU, headroom and verdict of a FitResult (or dashes when unknown)."""
    if fit is None:
        return "-", "-", "-", "unknown"
    weights = f"{fit.weights_gib_per_gpu:.2f} GiB" if fit.weights_gib_per_gpu is not None else "-"
    headroom = f"{fit.headroom_gib:+.2f} GiB" if fit.headroom_gib is not None else "-"
    return str(fit.gpus_used or "-"), weights, headroom, fit.verdict


class LayoutPicker(ReachesConsole, NotifiesWorkerErrors, ModalScreen[tuple[str, bool] | None]):
    """Returns (layout name, force) once the switch is confirmed, or None."""

    BINDINGS = bindings("picker")

    def __init__(self, host: Host, service: ServiceConfig, view: ServiceView | None) -> None:
        super().__init__()
        self.host = host
        self.service = service
        self.view = view
        self.fits: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box") as box:
            box.border_title = f"layouts of {self.service.name} on {self.host.name}"
            yield DataTable(id="picker-table", cursor_type="row", zebra_stripes=True)
            yield Static("computing fit…", id="picker-note")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in ("", "layout", "GPUs", "weights/GPU", "headroom", "fit", "predicted", "measured", "unit"):
            if column == "predicted":  # a fixed width: it fills after the fit, with nothing to re-measure
                table.add_column(PREDICTED_HEADER, key=column, width=PREDICTED_WIDTH)
                continue
            table.add_column(column, key=column or "mark")
        running = self.view.layout if self.view else None
        for lc in self.service.layouts:
            table.add_row(self._mark(lc.name, running), lc.name, "…", "…", "…", "…", "…", "-",
                          self.service.unit_for(lc), key=lc.name)  # fmt: skip
        if running and self.service.layout(running):
            table.move_cursor(row=[lc.name for lc in self.service.layouts].index(self.service.layout(running).name))
        table.focus()
        self.load_fits()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHANGING and self.console.readonly:
            return False
        return True

    def _mark(self, name: str, running: str | None) -> Text:
        marks = []
        if running and self.service.layout(running) and self.service.layout(running).name == name:
            state = self.view.state if self.view else None
            marks.append("✗ failed" if state is not None and state.is_failed else "▶ running")
        last = self.view.last_ready_layout if self.view else None
        if last and self.service.layout(last) and self.service.layout(last).name == name:
            marks.append("✓ last ready")
        return Text(" ".join(marks) or "")

    @work(exclusive=True, group="picker-fit", exit_on_error=False)
    async def load_fits(self) -> None:
        from console.ops.fit_check import fit_service_layouts

        note = self.query_one("#picker-note", Static)
        try:
            pairs = await fit_service_layouts(self.host, self.service)
        except Exception as exc:  # a missing model config is a line in the picker, not a crash
            note.update(Text(shown(f"fit unknown: {exc}")))  # it may quote a path or a host: never markup
            return
        table = self.query_one(DataTable)
        for lc, fit in pairs:
            gpus, weights, headroom, verdict = fit_cells(fit)
            # The columns were sized for the "…" placeholders: widen them to the figures (no "+2.48 Gi").
            table.update_cell(lc.name, "GPUs", gpus, update_width=True)
            table.update_cell(lc.name, "weights/GPU", weights, update_width=True)
            table.update_cell(lc.name, "headroom", headroom, update_width=True)
            color = self.app.theme_variables.get(_VERDICT_VAR.get(verdict, ""), "")
            label = Text(verdict.upper() if verdict in ("oom", "invalid") else verdict, style=f"bold {color}".strip())
            table.update_cell(lc.name, "fit", label, update_width=True)
        for name, said in self.measured().items():
            table.update_cell(name, "measured", said, update_width=True)
        readonly = self.console.readonly
        note.update(("read-only: view only.  " if readonly else "Enter: switch (asks first).  ")
                    + "Esc: close.  ▶ running  ✗ failed  ✓ last ready.  ~ predicted.  An OOM needs an explicit force.")
        self.load_speeds({lc.name: fit for lc, fit in pairs})

    @work(exclusive=True, group="picker-speed", exit_on_error=False)
    async def load_speeds(self, fits: dict[str, Any]) -> None:
        """The predicted column, then `fits`: whoever waits on `fits` finds the whole table filled."""
        import asyncio

        try:
            said = await self.predicted(fits)
        except Exception as exc:  # an unknown GPU or model: the column says so, the picker stays usable
            said = {lc.name: "-" for lc in self.service.layouts}
            self.query_one("#picker-note", Static).update(Text(shown(f"speed unknown: {exc}")))
        table = self.query_one(DataTable)
        for name, text in said.items():
            table.update_cell(name, "predicted", text)
        await asyncio.sleep(0)
        self.fits.update(fits)

    async def predicted(self, fits: dict[str, Any]) -> dict[str, str]:
        """`~37.0 ~623` per layout (per user at c=1, aggregate at c=64); `-` where fit refuses it (never
        ranked) or the host's GPU or model is unknown. The model runs in a thread, over its own store."""
        import asyncio

        from console.ops.explore import ResultsStore
        from console.ops.speed_check import history_calibration, host_speed_context, predict_layout

        ctx = await host_speed_context(self.host, self.service)
        if ctx is None:
            return {lc.name: "-" for lc in self.service.layouts}
        audit = self.console.audit

        def compute() -> dict[str, str]:
            store = ResultsStore.beside(audit) if audit is not None else None
            try:
                calibration = history_calibration(ctx, self.service, self.host.name, store)
            finally:
                if store is not None:
                    store.close()
            out = {}
            for lc in self.service.layouts:
                fit = fits.get(lc.name)
                if fit is not None and not fit.starts:
                    out[lc.name] = "-"
                    continue
                one = predict_layout(ctx, lc, 1, calibration)
                high = predict_layout(ctx, lc, HIGH_CONCURRENCY, calibration)
                out[lc.name] = f"~{one.per_request_tok_s:.1f} ~{high.output_tok_s:.0f}"
            return out

        return await asyncio.to_thread(compute)

    def measured(self) -> dict[str, str]:
        """Each layout's last measured tok/s (per user at c=1, aggregate at the top level), from the
        results history beside the audit log."""
        from console.ops.explore import ResultsStore, levels_of

        audit = self.console.audit
        if audit is None:
            return {}
        store = ResultsStore.beside(audit)
        try:
            probes = store.probes(host=self.host.name, service=self.service.name)
        finally:
            store.close()
        out = {}
        for lc in self.service.layouts:
            levels = levels_of(p.result for p in probes if p.layout == lc.name)
            if levels:
                top = max(levels)
                per_user = levels[1].per_user_tokens_per_s if 1 in levels else None
                head = f"{per_user:.1f}/u " if per_user else ""  # short: the unit column must stay whole
                out[lc.name] = f"{head}{levels[top].output_throughput or 0:.0f}@c{top}"
        return out

    def _selected(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_choose()

    def action_choose(self) -> None:
        from console.ui.screens.confirm import ConfirmSwitch

        if self.console.refuse_readonly("switch"):
            return
        name = self._selected()
        if name is None:
            return
        self.app.push_screen(ConfirmSwitch(self.host, self.service, name, self.view, fit=self.fits.get(name),
                                           fits=self.fits), self._confirmed)

    def _confirmed(self, choice: tuple[str, bool] | None) -> None:
        if choice is not None:
            self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)


_VERDICT_VAR = {"fits": "success", "tight": "warning", "oom": "error", "invalid": "error"}
