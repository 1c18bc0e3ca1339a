"""`x`: the explore screen. Pick layouts (fit shown, OOM ones unchecked) and concurrencies, then start;
each layout's switch phases and probe progress show live, results fill a comparison table and a chart.

The chart is Textual's own widgets (a Static of Unicode bars and the Pareto points), not
textual-plotext: it needs no new dependency, takes the theme's colours, and stays readable in a tmux
pane and in snapshot tests, where a braille plot would not.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, ProgressBar, SelectionList, Static
from textual.widgets.selection_list import Selection

from console.config import ServiceConfig
from console.domain.safe_text import shown
from console.errors import ConsoleError
from console.hosts.base import Host
from console.ops.explore import (
    ExploreOptions,
    LayoutDone,
    LevelFigures,
    Pick,
    ProbeOptions,
    ProbeResult,
    pareto_frontier,
)
from console.ops.switch import PhaseEvent, ProgressEvent, ResultEvent, StepEvent
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings

BAR = 40  # characters of the longest bar


def chart(layouts: dict[str, dict[int, LevelFigures]], gpus: dict[str, int], bar_style: str = "") -> Text:
    """Bars of aggregate tok/s per layout and concurrency, then the Pareto frontier."""
    text = Text()
    peak = max((level.output_throughput or 0.0 for lv in layouts.values() for level in lv.values()), default=0.0)
    for layout, levels in layouts.items():
        for c, level in levels.items():
            value = level.output_throughput or 0.0
            width = round(BAR * value / peak) if peak else 0
            text.append(f"{layout:<9} c={c:<4}", style="bold")
            text.append("█" * width, style=bar_style)
            text.append(f" {value:,.1f} tok/s\n")
    frontier = pareto_frontier(layouts, gpus)
    if frontier:
        text.append("Pareto (tok/s per user / per GPU): ", style="bold")
        text.append(", ".join(f"{p.layout} c={p.concurrency} {p.tokens_per_s_per_user:.1f}/{p.tokens_per_s_per_gpu:.1f}"
                              for p in frontier))
    return text


class ExploreScreen(ReachesConsole, ModalScreen[None]):
    """One explore of one service, owned by this screen: closing it mid-way stops the sweep, which then
    leaves a ready layout running."""

    BINDINGS = bindings("explore")

    def __init__(self, host: Host, service: ServiceConfig, probe: ProbeOptions | None = None) -> None:
        super().__init__()
        self.host, self.service = host, service
        self.probe = probe or ProbeOptions(concurrency=(1, 16, 64))
        self.running = False
        self.result = None
        self.levels: dict[str, dict[int, LevelFigures]] = {}

    def compose(self) -> ComposeResult:
        from console.domain.layout import gpus_used

        self.gpus = {lc.name: gpus_used(lc.layout, self.service.engine) for lc in self.service.layouts}
        with Vertical(id="explore-box") as box:
            box.border_title = f"explore {self.service.name} on {self.host.name}"
            with Horizontal(id="explore-setup"):
                yield SelectionList[str](id="explore-layouts")
                with Vertical(id="explore-options"):
                    yield Static("concurrency levels")
                    yield Input(",".join(map(str, self.probe.concurrency)), id="explore-concurrency")
                    yield Static("output tokens per request")
                    yield Input(str(self.probe.output_len), id="explore-output", type="integer")
                    yield Static("g: start · Esc: close (stops a sweep, leaving a ready layout)", id="explore-help")
            yield Static("computing fit…", id="explore-status")
            yield ProgressBar(id="explore-progress", show_eta=False)
            yield DataTable(id="explore-table", cursor_type="none", zebra_stripes=True)
            yield Static("", id="explore-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ProgressBar).display = False
        self.load_fits()

    @work(exclusive=True, group="explore-fit", exit_on_error=False)
    async def load_fits(self) -> None:
        from console.ops.fit_check import fit_service_layouts

        picks = self.query_one(SelectionList)
        try:
            pairs = await fit_service_layouts(self.host, self.service)
        except Exception as exc:  # an unreadable model config: every layout offered, the reason shown
            pairs = [(lc, None) for lc in self.service.layouts]
            self._status(f"fit unknown: {exc}")
        for lc, fit in pairs:
            verdict = fit.verdict if fit is not None else "unknown"
            label = f"{lc.name:<10} {verdict}" + (f" {fit.headroom_gib:+.2f} GiB" if fit is not None else "")
            picks.add_option(Selection(label, lc.name, verdict not in ("oom", "invalid")))
        self.query_one("#explore-status", Static).update(
            "read-only: view only" if self.console.readonly else "pick layouts (space), then g to start")
        picks.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start" and (self.console.readonly or self.running):
            return False
        return True

    def _options(self) -> ExploreOptions | None:
        from console.ops.explore import parse_levels

        layouts = tuple(lc.name for lc in self.service.layouts if lc.name in self.query_one(SelectionList).selected)
        try:
            levels = parse_levels(self.query_one("#explore-concurrency", Input).value)
            output = int(self.query_one("#explore-output", Input).value or "0")
        except (ConsoleError, ValueError) as exc:
            self.notify(str(exc), severity="error")
            return None
        if not layouts or output < 1:
            self.notify("pick at least one layout and a positive output length", severity="warning")
            return None
        probe = ProbeOptions(concurrency=levels, request_rate=None, num_prompts=self.probe.num_prompts,
                             input_len=self.probe.input_len, output_len=output, warmup=self.probe.warmup)
        return ExploreOptions(layouts, probe, Pick())

    def action_start(self) -> None:
        """`g`: ask first, as every key that takes the service down does; Cancel has the focus."""
        from console.ui.screens.confirm_unit import ConfirmUnitAction

        if self.console.refuse_readonly("explore") or self.running:
            return
        options = self._options()
        if options is None:
            return
        if self.console.audit is None:
            self.notify("explore keeps its progress in the audit log; this console has none", severity="error")
            return
        question = ConfirmUnitAction("explore", self.host.name, self.service.name, ", ".join(options.layouts), None)
        self.app.push_screen(question, lambda go: self._start(options) if go else None)

    def _start(self, options: ExploreOptions) -> None:
        if self.console.refuse_readonly("explore") or self.running:
            return
        table = self.query_one(DataTable)
        table.clear(columns=True)
        for column in ("layout", "outcome", "c=1 tok/s/user", *(f"agg c={c}" for c in options.probe.concurrency)):
            table.add_column(column, key=column)
        for name in options.layouts:
            table.add_row(name, "waiting", *(["-"] * (1 + len(options.probe.concurrency))), key=name)
        self.running = True
        self.query_one(ProgressBar).display = True
        self.run_explore(options)

    def action_close(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "explore")
            self.notify("explore stopped: leaving a ready layout running", timeout=5)
        self.dismiss(None)

    # -- live progress -------------------------------------------------------------------------------
    def _status(self, text: str) -> None:
        self.query_one("#explore-status", Static).update(Text(shown(text)))  # host text: never markup

    def explore_event(self, event) -> None:
        if isinstance(event, StepEvent):
            self._status(f"{event.layout}: {event.step} {event.detail}")
            if not event.rollback:
                self._set(event.layout, "outcome", "switching")
        elif isinstance(event, (PhaseEvent, ProgressEvent)):
            extra = f" {event.progress:.0%}" if isinstance(event, ProgressEvent) else ""
            self._status(f"{event.layout}: {event.phase.value}{extra}")
        elif isinstance(event, ResultEvent) and event.result is not None:
            self._status(f"{event.layout}: switch {event.result.outcome}")
        elif isinstance(event, ProbeResult):
            figures = LevelFigures.of(event)
            self.levels.setdefault(event.layout or "?", {})[figures.concurrency] = figures
            self._set(event.layout, "outcome", "probing")
            self._set(event.layout, f"agg c={event.summary.concurrency}", f"{event.summary.output_throughput:,.1f}")
            if event.summary.concurrency == 1:
                self._set(event.layout, "c=1 tok/s/user", f"{event.summary.per_user_tokens_per_s or 0:,.1f}")
            colour = self.app.theme_variables.get("accent", "")
            self.query_one("#explore-chart", Static).update(chart(self.levels, self.gpus, colour))
        elif isinstance(event, LayoutDone):
            self._set(event.report.layout, "outcome", event.report.outcome)

    def _set(self, layout: str | None, column: str, value: str) -> None:
        table = self.query_one(DataTable)
        try:
            table.update_cell(layout or "?", column, value, update_width=True)
        except Exception:  # a layout or column not in this table (a rollback's layout): nothing to show
            pass

    def probe_progress(self, concurrency: int | None, done: int, total: int, tokens: int, elapsed_s: float) -> None:
        self.query_one(ProgressBar).update(total=total, progress=done)
        rate = tokens / elapsed_s if elapsed_s > 0 else 0.0
        self._status(f"probe c={concurrency}: {done}/{total} requests, {rate:,.1f} tok/s")

    @work(exclusive=True, group="explore", exit_on_error=False)
    async def run_explore(self, options: ExploreOptions) -> None:
        from console.ops.explore import Explore, ResultsStore

        store = ResultsStore.beside(self.console.audit)
        try:
            self.result = await Explore(self.host, self.service, audit=self.console.audit, store=store,
                                        on_event=self.explore_event, on_progress=self.probe_progress).run(options)
            result = self.result
            self._status(f"done: {result.best_said()}; running {result.left_running or 'nothing'}")
            for report in result.layouts:
                self._set(report.layout, "outcome", ("* " if report.layout == result.best else "") + report.outcome)
        except Exception as exc:  # refused (another explore), or what the ops layer did not catch: one line
            self._status(f"explore failed: {exc}")
        finally:
            self.running = False
            store.close()
