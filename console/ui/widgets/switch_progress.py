"""The switch panel: steps and phases with their times, a shard-loading bar, elapsed time, the verdict."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, ProgressBar, Static

from console.config import ServiceConfig
from console.ui.widgets.failure_card import FailureCard

MAX_STEPS_SHOWN = 10


class SwitchPanel(Widget):
    """Fed with the switch's event dicts (`to_json()`); hidden until a switch starts."""

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
        self._final_result: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="switch-body"):
                yield Static(id="switch-steps")
                with Horizontal(id="switch-progress-row"):
                    yield Label("shards", id="switch-progress-label")
                    yield ProgressBar(total=100, show_eta=False, id="switch-progress")
                yield Static(id="switch-status")
            yield FailureCard(classes="-hidden", id="failure-card")

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
        self.border_title = f"switch {service} on {host} → {layout}" + (" (forced)" if force else "")
        self.border_subtitle = ""
        self.set_classes("")
        self.query_one(FailureCard).add_class("-hidden")
        self.query_one(ProgressBar).update(total=100, progress=0)
        self.query_one("#switch-progress-label", Label).update("shards")
        self._render_steps()
        self._render_status()
        if self._timer is None:
            self._timer = self.set_interval(0.2, self._render_status)

    def hide(self) -> None:
        self.add_class("-hidden")

    def finish(self, result: dict[str, Any]) -> None:
        """The whole switch ended (with its rollback, if any)."""
        self.finished = True
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.outcome = result.get("outcome")
        self.set_class(result.get("outcome") != "ready", "-failed")
        self.set_class(result.get("outcome") == "ready", "-ready")
        if result.get("outcome") != "ready":
            self._show_card(result)
        self._final_result = result
        self.border_subtitle = "d hides this panel"
        self._render_status()

    # -- events --------------------------------------------------------------------------------------
    def on_switch_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        elapsed = ev.get("elapsed_s")
        # In a result, "rollback" is the nested rollback result, not the flag the other events carry.
        rollback = ev.get("rollback") is True
        if kind == "step":
            step = str(ev.get("step", ""))
            detail = str(ev.get("detail") or ev.get("unit") or "")
            if ev.get("unit") and step in ("start", "reset-failed", "watch", "reset_failed"):
                self.follow_unit = str(ev["unit"])
            if step == "rollback":
                self.rolling_back_to = str(ev.get("layout") or "")
            if step != "watch":  # "watching journal, state and health" is what every start does
                self._add(elapsed, "ROLLBACK" if step == "rollback" else step, detail, rollback)
        elif kind == "phase":
            phase = str(ev.get("phase", "")).replace("_", " ")
            self._add_phase(elapsed, phase, rollback)
            if ev.get("phase") == "loading_weights":
                self.query_one(ProgressBar).update(progress=0)
        elif kind == "progress":
            fraction = float(ev.get("progress") or 0.0)
            self.query_one(ProgressBar).update(total=100, progress=round(fraction * 100, 1))
            label = str(ev.get("detail") or "shards")
            self.query_one("#switch-progress-label", Label).update(
                ("rollback " if rollback else "") + label[:40])
        elif kind == "finding" and ev.get("fatal", True):
            rank = f" {ev['rank']}" if ev.get("rank") else ""
            self._add(elapsed, "FAILED" if not rollback else "finding",
                      f"{ev.get('layout')}: {ev.get('kind')}{rank}: {ev.get('summary', '')}", rollback, bad=True)
            if not rollback:  # the card shows at once; the rollback then streams beside it
                self._show_card({"outcome": "failed", "host": self.host, "layout": ev.get("layout"), "failure": ev})
        elif kind == "state" and ev.get("active") == "failed":
            self._add(elapsed, "state", f"{ev.get('unit')}: failed, result={ev.get('result')}", rollback, bad=True)
        elif kind == "result":
            outcome = str(ev.get("outcome", "")).upper()
            text = f"{ev.get('layout')}: {outcome}"
            back = ev.get("rollback") or {}
            if back:
                text += f" · rollback to {back.get('layout')}: {str(back.get('outcome', '')).upper()}"
            elapsed = float(ev.get("elapsed_s") or 0.0) + float(back.get("elapsed_s") or 0.0)
            final_ok = outcome == "READY" or back.get("outcome") == "ready"
            self._add(elapsed, "RESULT", text, False, bad=not final_ok, ok=final_ok)
            if ev.get("outcome") not in ("ready", None):
                self._show_card(ev)
        self._render_status()

    def unit_to_follow(self, service: ServiceConfig) -> str | None:
        return self.follow_unit

    def _show_card(self, result: dict[str, Any]) -> None:
        if result.get("failure") or result.get("outcome") in ("failed", "timeout", "refused"):
            self.query_one(FailureCard).show_failure(result, self.fits_instead)

    # -- rendering -----------------------------------------------------------------------------------
    def _add(self, elapsed: Any, what: str, detail: str, rollback: bool, *, bad: bool = False,
             ok: bool = False) -> None:
        if rollback and what != "ROLLBACK":
            what = "↺ " + what  # the rollback's own steps, marked as such
        step = (elapsed if isinstance(elapsed, int | float) else None, what, detail,
                "bad" if bad else "ok" if ok else ("step" if rollback or what == "ROLLBACK" else ""))
        if self.steps and self.steps[-1][1:] == step[1:]:
            return  # the same finding from two ranks' lines, or a repeated probe verdict
        self.steps.append(step)
        self._render_steps()

    def _add_phase(self, elapsed: Any, phase: str, rollback: bool) -> None:
        """Phases of one start share a line, so the steps that tell the story stay in view."""
        what = "↺ phases" if rollback else "phases"
        if self.steps and self.steps[-1][1] == what:
            _, _, detail, tone = self.steps[-1]
            if detail.rsplit(" › ", 1)[-1] != phase:
                self.steps[-1] = (elapsed if isinstance(elapsed, int | float) else None, what,
                                  f"{detail} › {phase}", tone)
            self._render_steps()
        else:
            self._add(elapsed, "phases", phase, rollback)

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
        if self.finished:
            result = self._final_result
            elapsed = float(result.get("elapsed_s") or 0.0) + float((result.get("rollback") or {}).get("elapsed_s") or 0.0)
            out.append(f"{elapsed:.1f}s  ")
            if result.get("outcome") == "ready":
                out.append(f"READY {result.get('layout')}", style=s("switch--ok"))
            else:
                out.append(f"{str(result.get('outcome')).upper()} {result.get('layout')}", style=s("switch--bad"))
                rollback = result.get("rollback")
                if rollback:
                    tone = "switch--ok" if rollback.get("outcome") == "ready" else "switch--bad"
                    out.append(" · rollback ")
                    out.append(f"{rollback.get('layout')} {str(rollback.get('outcome')).upper()}", style=s(tone))
        else:
            doing = f"rolling back to {self.rolling_back_to}" if self.rolling_back_to else f"switching to {self.target}"
            out.append(f"elapsed {max(0.0, self.clock() - self.started_at):.1f}s  {doing}…")
        self.query_one("#switch-status", Static).update(out)
