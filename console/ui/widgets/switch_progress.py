"""The switch panel: steps and phases with their times, a shard-loading bar, elapsed time, the verdict."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, ProgressBar, Static

from console.domain.safe_text import shown
from console.ops.switch import (
    FindingEvent,
    PhaseEvent,
    ProgressEvent,
    ResultEvent,
    StateEvent,
    StepEvent,
    SwitchEvent,
    SwitchResult,
)
from console.ui.widgets.failure_card import FailureCard

MAX_STEPS_SHOWN = 10


class SwitchPanel(Widget):
    """Fed with the switch's typed events; hidden until a switch starts."""

    COMPONENT_CLASSES = {"switch--time", "switch--ok", "switch--bad", "switch--step"}

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        super().__init__(id=id, classes="-hidden")
        self.clock = clock
        self.steps: list[tuple[float | None, str, str, bool]] = []
        self.target: str | None = None
        self.started_at: float | None = None
        self.finished = False
        self.outcome: str | None = None
        self.follow_unit: str | None = None
        self.rolling_back_to: str | None = None
        self.fits_instead: list[str] = []
        self._timer = None
        self.host = ""
        self._final_result: SwitchResult | None = None

    def compose(self) -> ComposeResult:
        # The card comes first: beside the steps on a wide screen, above them on a narrow one
        # (console.tcss), so the verdict is what a short panel shows before it scrolls.
        with Horizontal(id="switch-row"):
            yield FailureCard(classes="-hidden", id="failure-card")
            with Vertical(id="switch-body"):
                yield Static(id="switch-steps")
                with Horizontal(id="switch-progress-row"):
                    yield Label("shards", id="switch-progress-label")
                    yield ProgressBar(total=100, show_eta=False, id="switch-progress")
                yield Static(id="switch-status")

    # -- lifecycle -----------------------------------------------------------------------------------
    def begin(self, host: str, service: str, layout: str, force: bool, fits_instead: Sequence[str] = ()) -> None:
        self.steps.clear()
        self.host = host
        self.target = layout
        self.started_at = self.clock()
        self.finished = False
        self.outcome = None
        self.follow_unit = None
        self.rolling_back_to: str | None = None
        self.fits_instead = list(fits_instead)
        # A restart passes the unit the host reported as `layout`: host text, so a Text, never markup.
        title = f"switch {service} on {host} → {layout}" + (" (forced)" if force else "")
        self.border_title = Text(shown(title))
        self.border_subtitle = ""
        self.set_classes("")
        self.screen.add_class("-switch-shown")  # a short screen gives the panel the top panes' rows
        self.query_one(FailureCard).add_class("-hidden")
        self.query_one(ProgressBar).update(total=100, progress=0)
        self.query_one("#switch-progress-label", Label).update("shards")
        self._render_steps()
        self._render_status()
        if self._timer is None:
            self._timer = self.set_interval(0.2, self._render_status)

    def hide(self) -> None:
        self.add_class("-hidden")
        self.screen.remove_class("-switch-shown")

    def finish(self, result: SwitchResult) -> None:
        """The whole switch ended (with its rollback, if any)."""
        self.finished = True
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.outcome = result.outcome
        self.set_class(result.outcome != "ready", "-failed")
        self.set_class(result.outcome == "ready", "-ready")
        self.add_class("-finished")  # its bar belonged to a start that is over
        # A ready switch folds to its verdict line: the top panes come back; a failed one keeps the room.
        self.screen.set_class(result.outcome != "ready", "-switch-shown")
        if result.outcome != "ready":
            self._show_card(result)
        self._final_result = result
        self.border_subtitle = "d hides this panel"
        self._render_status()
        self.call_after_refresh(self._say_scroll_key)

    def _say_scroll_key(self) -> None:
        """A panel too short for its card and verdict says which key reaches the verdict."""
        if self.finished and self.max_scroll_y > 0:
            self.border_subtitle = "v: verdict · d hides this panel"

    def toggle_verdict(self) -> None:
        """Scroll to the verdict line (under the card on a narrow screen), or back to the top."""
        if self.has_class("-hidden"):
            return
        if self.scroll_y < self.max_scroll_y:
            self.scroll_to_widget(self.query_one("#switch-status"), animate=False, top=False)
            if self.scroll_y < self.max_scroll_y:
                self.scroll_end(animate=False)
        else:
            self.scroll_home(animate=False)

    # -- events --------------------------------------------------------------------------------------
    def on_switch_event(self, ev: SwitchEvent) -> None:
        elapsed, rollback = ev.elapsed_s, ev.rollback
        if isinstance(ev, StepEvent):
            if ev.unit and ev.step in ("start", "watch"):
                self.follow_unit = ev.unit
            if ev.step == "rollback":
                self.rolling_back_to = ev.layout
            if ev.step in ("start", "rollback"):  # a new start: the last one's bar (41/64) is not its
                self.query_one(ProgressBar).update(total=100, progress=0)
                self.query_one("#switch-progress-label", Label).update("rollback shards" if rollback else "shards")
            if ev.step != "watch":  # "watching journal, state and health" is what every start does
                self._add(elapsed, "ROLLBACK" if ev.step == "rollback" else ev.step, ev.detail or ev.unit or "",
                          rollback)
        elif isinstance(ev, PhaseEvent):
            self._add_phase(elapsed, ev.phase.value.replace("_", " "), rollback, ev.node)
            if ev.phase.value == "loading_weights":
                self.query_one(ProgressBar).update(progress=0)
        elif isinstance(ev, ProgressEvent):
            self.query_one(ProgressBar).update(total=100, progress=round(ev.progress * 100, 1))
            label = ("rollback " if rollback else "") + (ev.detail or "shards")[:40]  # the journal's words
            self.query_one("#switch-progress-label", Label).update(Text(shown(label)))
        elif isinstance(ev, FindingEvent) and ev.finding is not None and ev.finding.fatal:
            f = ev.finding
            rank = f" {f.rank}" if f.rank else ""
            self._add(elapsed, "FAILED" if not rollback else "finding",
                      f"{ev.layout}: {f.cls.value}{rank}: {f.summary}", rollback, bad=True)
            if not rollback:  # the card shows at once; the rollback then streams beside it
                self._show_card(SwitchResult(host=self.host, service="", layout=ev.layout, outcome="failed",
                                             failure=f))
        elif isinstance(ev, StateEvent) and ev.state is not None and ev.state.active == "failed":
            self._add(elapsed, "state", f"{ev.state.unit}: failed, result={ev.state.result}", rollback, bad=True)
        elif isinstance(ev, ResultEvent) and ev.result is not None:
            result, back = ev.result, ev.result.rollback
            text = f"{result.layout}: {result.outcome.upper()}"
            if back is not None:
                text += f" · rollback to {back.layout}: {back.outcome.upper()}"
            final_ok = result.outcome == "ready" or (back is not None and back.outcome == "ready")
            self._add(_total_elapsed(result), "RESULT", text, False, bad=not final_ok, ok=final_ok)
            if result.outcome != "ready":
                self._show_card(result)
        self._render_status()

    def unit_to_follow(self) -> str | None:
        return self.follow_unit

    def _show_card(self, result: SwitchResult) -> None:
        if result.failure is not None or result.outcome in ("failed", "timeout", "refused"):
            self.query_one(FailureCard).show_failure(result, self.fits_instead)

    # -- rendering -----------------------------------------------------------------------------------
    def _add(self, elapsed: float | None, what: str, detail: str, rollback: bool, *, bad: bool = False,
             ok: bool = False) -> None:
        if rollback and what != "ROLLBACK":
            what = "↺ " + what  # the rollback's own steps, marked as such
        step = (elapsed if isinstance(elapsed, int | float) else None, what, detail,
                "bad" if bad else "ok" if ok else ("step" if rollback or what == "ROLLBACK" else ""))
        if self.steps and self.steps[-1][1:] == step[1:]:
            return  # the same finding from two ranks' lines, or a repeated probe verdict
        self.steps.append(step)
        self._render_steps()

    def _add_phase(self, elapsed: float | None, phase: str, rollback: bool, node: str | None = None) -> None:
        """Phases of one start share a line, so the steps that tell the story stay in view; over several
        hosts each node has its line (`phases demo-b`), so a node left behind at a phase shows."""
        what = ("↺ phases" if rollback else "phases") + (f" {node}" if node else "")
        recent = [i for i in range(len(self.steps) - 1, max(len(self.steps) - 8, -1), -1)
                  if self.steps[i][1] == what]  # fmt: skip
        if recent:
            i = recent[0]
            _, _, detail, tone = self.steps[i]
            if detail.rsplit(" › ", 1)[-1] != phase:
                self.steps[i] = (elapsed if isinstance(elapsed, int | float) else None, what,
                                 f"{detail} › {phase}", tone)
            self._render_steps()
        else:
            self._add(elapsed, "phases" + (f" {node}" if node else ""), phase, rollback)

    def _render_steps(self) -> None:
        s = self.get_component_rich_style
        out = Text(no_wrap=True, overflow="ellipsis")
        shown = self.steps[-MAX_STEPS_SHOWN:]
        for i, (elapsed, what, detail, tone) in enumerate(shown):
            if i:
                out.append("\n")
            stamp = f"+{elapsed:6.2f}s " if elapsed is not None else " " * 9
            out.append(stamp, style=s("switch--time"))
            style = {"bad": "switch--bad", "ok": "switch--ok", "step": "switch--step"}.get(tone)
            out.append(f"{what:<13}", style=s(style) if style else "")
            out.append(detail, style=s(style) if tone in ("bad", "ok") else "")
        self.query_one("#switch-steps", Static).update(out)

    def _render_status(self) -> None:
        if self.started_at is None:
            return
        s = self.get_component_rich_style
        out = Text()
        if self.finished and self._final_result is not None:
            result = self._final_result
            out.append(f"{_total_elapsed(result):.1f}s  ")
            if result.outcome == "ready":
                out.append(f"READY {result.layout}", style=s("switch--ok"))
                times = [(name, value) for name, value in (("port", result.port_open_s),
                         ("HTTP", result.http_ready_s), ("token", result.first_token_s)) if value is not None]
                if times:
                    out.append("  " + " · ".join(f"{name} {value:.1f}s" for name, value in times))
            else:
                out.append(f"{result.outcome.upper()} {result.layout}", style=s("switch--bad"))
                back = result.rollback
                if back is not None:
                    tone = "switch--ok" if back.outcome == "ready" else "switch--bad"
                    out.append(" · rollback ")
                    out.append(f"{back.layout} {back.outcome.upper()}", style=s(tone))
        else:
            doing = f"rolling back to {self.rolling_back_to}" if self.rolling_back_to else f"switching to {self.target}"
            out.append(f"elapsed {max(0.0, self.clock() - self.started_at):.1f}s  {doing}…")
        self.query_one("#switch-status", Static).update(out)


def _total_elapsed(result: SwitchResult) -> float:
    """The switch's time with its rollback's."""
    return result.elapsed_s + (result.rollback.elapsed_s if result.rollback is not None else 0.0)
