"""The journal pane: follows one unit's journal in its own worker and feeds the Line-API view.

Ingestion is batched: the worker triages each entry and queues it; a one-shot timer flushes the
queue into the view at most ~30 times a second, with one refresh per flush. The queue is bounded by
the line cap, so a unit writing tens of thousands of lines a second costs memory no larger than that.
"""

from __future__ import annotations

import asyncio
import re
import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from console.domain.journal_order import systemd_text
from console.domain.safe_text import shown
from console.domain.values import Engine, Finding, ReadinessEvent
from console.hosts.base import Host
from console.ui.widgets.journal_lines import LineFilter
from console.ui.widgets.journal_view import JournalView
from console.ui.worker_errors import NotifiesWorkerErrors

FLUSH_INTERVAL_S = 1 / 30
#: Lines moved into the view per flush (about 8 ms of work on a slow core); a backlog beyond it goes
#: in the next flushes, so one burst (a reconnect's backlog) never holds a key for a long frame.
MAX_FLUSH_LINES = 4000
BACKLOG_LINES = 400


class PhaseSeen(Message):
    """The engine's readiness phase moved (from the journal), for the service pane."""

    def __init__(self, host: str, unit: str, event: ReadinessEvent) -> None:
        super().__init__()
        self.host, self.unit, self.event = host, unit, event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PhaseSeen) and message.host == self.host and message.unit == self.unit


class JournalPane(NotifiesWorkerErrors, Vertical):
    """A unit's live journal tail with triage highlighting, follow mode, filter, search and copy.

    Its keys are bound on the host screen (so they work whatever has focus); the actions live here.
    """

    def __init__(self, host: Host, *, engine: Engine, line_cap: int, id: str | None = None) -> None:
        super().__init__(id=id)
        self.host = host
        self.engine = engine
        self.line_cap = line_cap
        self.unit: str | None = None
        self._pending: list[tuple[str, str, float | None, Finding | None]] = []
        self._flush_scheduled = False
        self._last_flush = 0.0
        self._find_mode = "filter"
        self.received = 0
        self._cursors: dict[str, str] = {}
        self.border_title = "journal"
        self._title = "journal"

    def compose(self) -> ComposeResult:
        yield JournalView(line_cap=self.line_cap, end_key_is_screens=True, id="journal-view")
        yield Input(id="journal-find", classes="-hidden")

    @property
    def view(self) -> JournalView:
        return self.query_one(JournalView)

    # -- following a unit ----------------------------------------------------------------------------
    def follow_unit(self, unit: str | None) -> None:
        """Tail `unit` (restarting the worker if it changed); lines already shown stay."""
        if unit is None or unit == self.unit:
            return
        self.unit = unit
        self._update_title()
        self.tail(unit)

    @work(exclusive=True, group="journal-tail", exit_on_error=False)
    async def tail(self, unit: str) -> None:
        """Follow the unit's journal until the pane unmounts or another unit is chosen."""
        delay_s = 0.5
        # Coming back to a unit resumes after the last entry shown: nothing twice, nothing lost.
        cursor: str | None = self._cursors.get(unit)
        self.queue_line(f"──── {unit} ────", unit, None, None)
        while True:
            try:
                # The host's one stream of this unit, triaged once for the pane and a switch's watcher alike.
                stream = self.host.journals.subscribe(
                    unit, engine=self.engine, after_cursor=cursor, lines=None if cursor else BACKLOG_LINES
                )
                count = 0
                async for read in stream:
                    entry = read.entry
                    cursor = self._cursors[unit] = entry.cursor
                    if read.phase is not None:
                        self.post_message(PhaseSeen(self.host.name, unit, read.phase))
                    text = systemd_text(entry.message, entry.ts) if entry.source == "systemd" else entry.message
                    self.queue_line(text, unit, entry.ts, read.findings[-1] if read.findings else None)
                    count += 1
                    if count % 256 == 0:
                        await asyncio.sleep(0)  # a firehose must not starve keys and frames
                delay_s = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped host: say so, then resume after the cursor
                self.border_subtitle = Text(shown(f"journal stream lost: {exc}"))  # host text: never markup
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, 10.0)

    def queue_line(self, text: str, unit: str, ts: float | None, finding: Finding | None) -> None:
        """Queue one line for the next flush (bounded by the line cap)."""
        self.received += 1
        pending = self._pending
        pending.append((text, unit, ts, finding))
        if len(pending) > self.line_cap:
            del pending[: len(pending) - self.line_cap]
        if not self._flush_scheduled:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        self._flush_scheduled = True
        wait = max(0.0, self._last_flush + FLUSH_INTERVAL_S - time.monotonic())
        self.set_timer(max(wait, 0.001), self.flush)

    def flush(self) -> None:
        """Move up to MAX_FLUSH_LINES queued lines into the view with one refresh."""
        self._flush_scheduled = False
        self._last_flush = time.monotonic()
        if len(self._pending) > MAX_FLUSH_LINES:
            batch = self._pending[:MAX_FLUSH_LINES]
            del self._pending[:MAX_FLUSH_LINES]
            self._schedule_flush()
        else:
            batch, self._pending = self._pending, []
        if batch:
            try:
                self.view.append_batch(batch)
            except Exception as exc:  # a line the view cannot take is reported, the stream goes on
                self.notify(f"journal: {len(batch)} lines dropped: {exc}", severity="error")
            self._update_title()

    def _update_title(self) -> None:
        view = self.view if self.is_mounted else None
        parts = [f"journal · {self.unit or '-'}"]
        if view is not None:
            if not view.follow:
                parts.append("PAUSED (G to follow)")
            if view.line_filter is not None:
                parts.append(f"filter {view.line_filter.text!r}: {view.row_count}/{view.line_count}")
            if view.search is not None:
                parts.append(f"search {view.search.pattern!r}")
            if view.hidden_probes:
                parts.append(f"{view.hidden_probes} probe lines hidden (h shows)")
            elif view.show_probes:
                parts.append("probe lines shown (h hides)")
        title = " · ".join(parts)
        if title != self._title:  # a flush that changes nothing in the title repaints nothing here
            self._title = title
            self.border_title = Text(title)  # a unit's name, a typed filter: text, never markup

    @on(JournalView.FollowChanged)
    def _follow_changed(self) -> None:
        self._update_title()

    # -- actions (from the registry) -----------------------------------------------------------------
    def action_next_finding(self) -> None:
        self._announce(self.view.next_finding(), "no findings in view")

    def action_prev_finding(self) -> None:
        self._announce(self.view.next_finding(backwards=True), "no findings in view")

    def action_next_match(self) -> None:
        self._announce(self.view.next_match(), "no match" if self.view.search else "no search: press s")

    def action_prev_match(self) -> None:
        self._announce(self.view.next_match(backwards=True), "no match" if self.view.search else "no search")

    def _announce(self, line: object, empty: str) -> None:
        if line is None:
            self.notify(empty, severity="warning", timeout=2)
        self._update_title()

    def action_filter(self) -> None:
        self._open_find("filter", "filter: regex, or class:oom / class:nccl / class:traceback / class:finding "
                                  "(empty clears)")

    def action_toggle_probes(self) -> None:
        """Show the console's own probe lines, or fold them out again."""
        self.view.set_show_probes(not self.view.show_probes)
        self._update_title()

    def action_search(self) -> None:
        self._open_find("search", "search: regex (n / N jump; empty clears)")

    def _open_find(self, mode: str, placeholder: str) -> None:
        self._find_mode = mode
        find = self.query_one("#journal-find", Input)
        find.placeholder = placeholder
        current = self.view.line_filter.text if mode == "filter" and self.view.line_filter else ""
        find.value = current if mode == "filter" else (self.view.search.pattern if self.view.search else "")
        find.remove_class("-hidden")
        # Focus at once, not after a refresh (`focus()`): the keys queued behind `/` must reach the input.
        self.screen.set_focus(find)

    @on(Input.Submitted, "#journal-find")
    def _find_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        try:
            if self._find_mode == "filter":
                self.view.set_filter(LineFilter.parse(text) if text else None)
            else:
                self.view.set_search(re.compile(text, re.IGNORECASE) if text else None)
                if text:
                    self.view.next_match()
        except re.error as exc:
            self.notify(f"bad regex {text!r}: {exc}", severity="error")
            return
        self._close_find()

    def on_key(self, event) -> None:
        find = self.query_one("#journal-find", Input)
        if event.key == "escape" and find.has_focus:
            event.stop()
            self._close_find()

    def _close_find(self) -> None:
        self.query_one("#journal-find", Input).add_class("-hidden")
        self.screen.set_focus(self.view)
        self._update_title()

    def action_copy_line(self) -> None:
        view = self.view
        line = view.cursor_line or view.line_at_row(view.row_count - 1)
        if line is None:
            self.notify("nothing to copy", severity="warning", timeout=2)
            return
        self.app.copy_to_clipboard(line.text)
        self.notify(f"copied: {line.text[:60]}", timeout=2)

    def action_follow(self) -> None:
        self.view.clear_cursor()
        self.view.set_follow(True)
        self._update_title()

    def action_clear_filter(self) -> None:
        self.view.set_filter(None)
        self.view.set_search(None)
        self.view.clear_cursor()
        self._update_title()
