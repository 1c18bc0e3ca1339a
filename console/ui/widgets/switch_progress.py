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

MAX_STEPS_SHOWN = 9


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
        self.fits_instead = list(fits_instead)
        self.border_title = f"switch {service} on {host} → {layout}" + (" (forced)" if force else "")
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
        rollback = result.get("rollback") or None
        self.outcome = result.get("outcome")
        if rollback:
            outcome = str(rollback.get("outcome", "")).upper()
            self._add(rollback.get("elapsed_s"), "ROLLBACK RESULT", f"{rollback.get('layout')}: {outcome}", True,
                      bad=outcome != "READY", ok=outcome == "READY")
        self.set_class(result.get("outcome") != "ready", "-failed")
        self.set_class(result.get("outcome") == "ready", "-ready")
        if result.get("outcome") != "ready":
            self._show_card(result)
        self._final_result = result
        self._render_status()

    # -- events --------------------------------------------------------------------------------------
    def on_switch_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        elapsed = ev.get("elapsed_s")
        rollback = bool(ev.get("rollback"))
        if kind == "step":
            step = str(ev.get("step", ""))
            detail = str(ev.get("detail") or ev.get("unit") or "")
            if ev.get("unit") and step in ("start", "reset-failed", "watch", "reset_failed"):
                self.follow_unit = str(ev["unit"])
            self._add(elapsed, "ROLLBACK " + step if rollback and step != "rollback" else step, detail, rollback)
        elif kind == "phase":
            rank = f" ({ev['rank']})" if ev.get("rank") else ""
            self._add(elapsed, "phase", f"{str(ev.get('phase', '')).replace('_', ' ')}{rank}", rollback)
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
            self._add(elapsed, "finding", f"{ev.get('kind')}{rank}: {ev.get('summary', '')}", rollback, bad=True)
            if not rollback:  # the card shows at once; the rollback then streams below the steps
                self._show_card({"outcome": "failed", "host": self.host, "layout": ev.get("layout"), "failure": ev})
        elif kind == "state":
            self._add(elapsed, "state", f"{ev.get('unit')}: {ev.get('active')}/{ev.get('sub')}"
                      + (f" result={ev['result']}" if ev.get("result") not in (None, "", "success") else ""), rollback)
        elif kind == "health":
            self._add(elapsed, "health", f"{ev.get('status')}"
                      + (f" (HTTP {ev['http_status']})" if ev.get("http_status") else ""), rollback)
        elif kind == "result":
            outcome = str(ev.get("outcome", "")).upper()
            self._add(elapsed, "ROLLBACK RESULT" if rollback else "RESULT", f"{ev.get('layout')}: {outcome}",
                      rollback, bad=outcome != "READY", ok=outcome == "READY")
            if ev.get("outcome") not in ("ready", None) and not rollback:
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
        self.steps.append((elapsed if isinstance(elapsed, int | float) else None, what, detail,
                           "bad" if bad else "ok" if ok else ("step" if rollback or what == "step" else "")))
        self._render_steps()

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
            out.append(f"{what:<16}", style=s(style) if style else s("switch--step") if what.startswith("ROLLBACK") else "")
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
            out.append(f"elapsed {elapsed:.1f}s  ")
            if result.get("outcome") == "ready":
                out.append(f"READY {result.get('layout')}", style=s("switch--ok"))
            else:
                out.append(f"{str(result.get('outcome')).upper()} {result.get('layout')}", style=s("switch--bad"))
                rollback = result.get("rollback")
                if rollback:
                    tone = "switch--ok" if rollback.get("outcome") == "ready" else "switch--bad"
                    out.append("  ·  rollback to ")
                    out.append(f"{rollback.get('layout')} {str(rollback.get('outcome')).upper()}", style=s(tone))
            out.append("   (d hides this panel)", style=s("switch--time"))
        else:
            out.append(f"elapsed {max(0.0, self.clock() - self.started_at):.1f}s  switching to {self.target}…")
        self.query_one("#switch-status", Static).update(out)
