"""`b`: probe the running layout, after asking (a probe is production load), with live progress and results."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, ProgressBar, Static

from console.config import ServiceConfig
from console.domain.safe_text import shown
from console.hosts.base import Host
from console.ops.explore import ProbeOptions
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings

#: What `b` sends: two levels, bench_serving-sized requests (4 x the level, at least 8, per level).
TUI_PROBE = ProbeOptions(concurrency=(1, 8), input_len=256, output_len=128, warmup=1)

RESULT_COLUMNS = ("concurrency", "tok/s", "tok/s/user", "TTFT p50 ms", "TTFT p99 ms", "TPOT ms", "ITL p50 ms",
                  "ok", "failed")


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def level_cells(summary) -> tuple[str, ...]:
    """One probe level's row of the results table."""
    return (str(summary.concurrency), _num(summary.output_throughput), _num(summary.per_user_tokens_per_s),
            _num(summary.ttft.median_ms), _num(summary.ttft.p99_ms), _num(summary.tpot.mean_ms),
            _num(summary.itl.median_ms), str(summary.completed), str(summary.failed))  # fmt: skip


class ProbeScreen(ReachesConsole, ModalScreen[None]):
    """Asks first (the focus on Cancel); then probes each level and fills the table as levels end."""

    BINDINGS = bindings("probe")

    def __init__(self, host: Host, service: ServiceConfig, layout: str | None,
                 options: ProbeOptions | None = None) -> None:
        super().__init__()
        self.host, self.service, self.layout_name = host, service, layout
        self.options = options or TUI_PROBE
        self.running = False
        self.results: list = []

    def compose(self) -> ComposeResult:
        levels = ", ".join(str(c) for c in self.options.concurrency)
        counts = ", ".join(str(self.options.prompt_count(c)) for c in self.options.concurrency)
        with Vertical(id="probe-box") as box:
            box.border_title = f"probe {self.service.name} on {self.host.name}"
            text = Text()
            text.append(f"Probe {self.layout_name or 'the running layout'} on {self.host.name}?\n\n", style="bold")
            text.append(f"It sends {counts} streaming requests at concurrency {levels} "
                        f"({self.options.input_len} tokens in, {self.options.output_len} out): production load "
                        "on a serving engine. Results go to the results history.")
            yield Static(text, id="probe-text")
            yield ProgressBar(id="probe-progress", show_eta=False)
            yield Static("", id="probe-status")
            yield DataTable(id="probe-table", cursor_type="none", zebra_stripes=True)
            with Horizontal(id="probe-buttons"):
                yield Button("Probe (y)", id="probe-yes", variant="warning")
                yield Button("Cancel (n)", id="probe-no")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in RESULT_COLUMNS:
            table.add_column(column, key=column)
        table.display = False
        self.query_one(ProgressBar).display = False
        self.query_one("#probe-no", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm" and (self.console.readonly or self.running or self.results):
            return False
        return True

    def action_confirm(self) -> None:
        if self.console.refuse_readonly("probe") or self.running:
            return
        self.running = True
        self.query_one("#probe-yes", Button).display = False
        self.query_one("#probe-no", Button).label = "Stop (n)"
        self.query_one(DataTable).display = True
        self.query_one(ProgressBar).display = True
        self.run_probe()

    def action_cancel(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "probe")
            self.query_one("#probe-status", Static).update("stopped")
            self.running = False
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "probe-yes":
            self.action_confirm()
        else:
            self.action_cancel()

    def progress(self, concurrency: int | None, done: int, total: int, tokens: int, elapsed_s: float) -> None:
        """Live: requests done of the level, and its output tok/s so far."""
        self.query_one(ProgressBar).update(total=total, progress=done)
        rate = tokens / elapsed_s if elapsed_s > 0 else 0.0
        self.query_one("#probe-status", Static).update(
            f"concurrency {concurrency}: {done}/{total} requests, {rate:,.1f} tok/s")

    def level_done(self, result) -> None:
        self.results.append(result)
        self.query_one(DataTable).add_row(*level_cells(result.summary))

    @work(exclusive=True, group="probe", exit_on_error=False)
    async def run_probe(self) -> None:
        from console.ops.explore import ResultsStore, probe_service

        audit = self.console.audit
        store = ResultsStore.beside(audit) if audit is not None else None
        status = self.query_one("#probe-status", Static)
        try:
            await probe_service(self.host, self.service, self.options, audit=audit, store=store,
                                on_result=self.level_done, on_progress=self.progress)
        except Exception as exc:  # refused, not ready, warm-up failed: one line in the screen
            status.update(Text(shown(f"probe failed: {exc}")))  # it quotes the server: never markup
        else:
            failed = sum(r.summary.failed for r in self.results)
            status.update(f"done: {len(self.results)} levels, {failed} failed requests" +
                          ("" if store is not None else " (no audit log: not stored)"))
        finally:
            self.running = False
            self.query_one("#probe-no", Button).label = "Close (n)"
            if store is not None:
                store.close()
