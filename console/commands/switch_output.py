"""How `switch` and `demo` print a switch: JSON lines for scripts, or timed lines and a plain verdict."""

from __future__ import annotations

import sys
from typing import TextIO

from console.commands.host_args import print_json
from console.domain.safe_text import shown
from console.ops.switch import (
    REFUSED,
    FindingEvent,
    HealthEvent,
    PhaseEvent,
    ProgressEvent,
    ResultEvent,
    StateEvent,
    StepEvent,
    SwitchEvent,
    SwitchResult,
    failure_rows,
)


class JsonPrinter:
    """Each event as one JSON line."""

    def __call__(self, event: SwitchEvent) -> None:
        print_json(event.to_json())


def print_refused(host: str, service: str, layout: str, reason: str) -> None:
    """The `{"event": "result", "outcome": "refused", ...}` line of a command refused before it began
    (read-only): a `--json` reader gets its one result line whatever happened."""
    print_json(SwitchResult(host=host, service=service, layout=layout, outcome=REFUSED, reason=reason).to_json())


#: Rows the verdict's own sentence already says, or that belong to the card only.
_SAID = {"layout", "cause", "reason", "verdict", "fits", "evidence", "bundle"}


def failure_words(result: SwitchResult) -> list[str]:
    """A failure in plain words: its cause, then its facts as the TUI's card shows them (one renderer)."""
    failure = result.failure
    if failure is None:
        return [result.reason or result.outcome]
    rows = [row for row in failure_rows(result) if row.label not in _SAID]
    facts = " · ".join(f"{row.label} {row.value}" for row in rows if row.label and row.label != "do")
    lines = [failure.summary] + ([facts] if facts else [])
    lines += [f"do: {row.value}" for row in rows if row.label == "do"]
    lines += [f"log: {row.value[:200]}" for row in rows if not row.label and row.value != failure.summary]
    return lines


def readiness_times(result: SwitchResult) -> str:
    """`port open 41.2 s · HTTP ready 41.9 s · first token 42.0 s`, the times there are ("" for none)."""
    times = (("port open", result.port_open_s), ("HTTP ready", result.http_ready_s),
             ("first token", result.first_token_s))
    return " · ".join(f"{name} {value:.1f} s" for name, value in times if value is not None)


def verdict_lines(result: SwitchResult) -> list[str]:
    """The final verdict of a switch and of its rollback, in plain words."""
    detected = f"{result.detected_after_s:.2f} s" if result.detected_after_s is not None else "?"
    out: list[str] = []
    if result.outcome == "ready":
        out.append(
            f"READY: {result.layout} is serving after {result.elapsed_s:.1f} s (verdict {detected} after the engine said so)"
        )
        if readiness_times(result):
            out.append(f"  {readiness_times(result)}")
    elif result.outcome == "unchanged":
        out.append(f"UNCHANGED: {result.reason}")
    elif result.outcome == "refused":
        out.append(f"REFUSED: {result.reason}")
    elif result.outcome == "timeout":
        out.append(f"TIMEOUT: {result.layout}: {result.reason}")
    else:
        words = failure_words(result)
        out.append(f"FAILED: {result.layout} after {result.elapsed_s:.1f} s: {words[0]}")
        out += [f"  {w}" for w in words[1:]]
        out.append(f"  detected {detected} after the decisive log line or state change")
    if result.evidence is not None:
        out.append(f"  evidence: {result.evidence}")
    if result.bundle is not None:
        out.append(f"  bundle: {result.bundle} (serve-console replay BUNDLE)")
    back = result.rollback
    if back is not None:
        back_detected = f"{back.detected_after_s:.2f} s" if back.detected_after_s is not None else "?"
        if back.outcome == "ready":
            out.append(
                f"ROLLED BACK: {back.layout} is ready again after {back.elapsed_s:.1f} s (verdict {back_detected} after its ready line)"
            )
        else:
            words = failure_words(back)
            out.append(f"ROLLBACK {back.outcome.upper()}: {back.layout}: {words[0]}")
    return out


class HumanPrinter:
    """Timed lines as the switch goes, then the verdict."""

    def __init__(
        self, host: str, service: str, *, out: TextIO | None = None, progress_step: float = 0.25
    ) -> None:
        self.host = host
        self.service = service
        self.out = out or sys.stdout
        self.progress_step = progress_step
        self._next_progress = 0.0

    def line(self, event: SwitchEvent, kind: str, text: str) -> None:
        mark = "  ↩ " if event.rollback else "  "
        node = f"{event.node}: " if event.node else ""  # a layout over several hosts: whose line
        self.out.write(f"{mark}{event.elapsed_s:7.2f}s  {kind:<9} {shown(node + text)}\n")
        self.out.flush()

    def __call__(self, event: SwitchEvent) -> None:
        if isinstance(event, StepEvent):
            self.line(event, event.step, event.detail)
        elif isinstance(event, PhaseEvent):
            self._next_progress = self.progress_step
            rank = f" [{event.rank}]" if event.rank else ""
            self.line(event, "phase", f"{event.phase.value}{rank}  {event.detail}".rstrip())
        elif isinstance(event, ProgressEvent):
            if event.progress >= self._next_progress or event.progress >= 1.0:
                while self._next_progress <= event.progress:
                    self._next_progress += self.progress_step
                self.line(event, "progress", f"{event.phase.value} {event.progress:4.0%}  {event.detail}")
        elif isinstance(event, FindingEvent) and event.finding is not None:
            f = event.finding
            tag = "finding" if f.fatal else "note"
            self.line(event, tag, f"[{f.cls.value}]{' ' + f.rank if f.rank else ''} {f.summary}")
        elif isinstance(event, StateEvent) and event.state is not None:
            st = event.state
            result = f", {st.result}" if st.result and st.result != "success" else ""
            self.line(event, "state", f"{st.unit} {st.active} ({st.sub}{result})")
        elif isinstance(event, HealthEvent) and event.sample is not None:
            code = f" {event.sample.http_status}" if event.sample.http_status else ""
            self.line(event, "health", f"{event.sample.status}{code}")
        elif isinstance(event, ResultEvent) and event.result is not None:
            for text in verdict_lines(event.result):
                self.out.write(shown(text) + "\n")
            self.out.flush()
