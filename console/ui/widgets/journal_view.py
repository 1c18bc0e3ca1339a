"""The journal pane's Line-API view: bounded storage, its own strip cache, batched appends.

Textual's `Log` is the reference. The differences that matter here: lines arrive in batches with one
refresh per batch, each line carries its triage finding (highlighted through component classes, so
the colours come from the theme), storage is capped, and a filter or a search never drops a line.
The lines live in `journal_store`; what one line looks like, and its strip cache, in `journal_strips`.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence

from textual.actions import SkipAction
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.domain.values import Finding
from console.ui.widgets.journal_lines import JournalLine, LineFilter
from console.ui.widgets.journal_store import JournalStore
from console.ui.widgets.journal_strips import JOURNAL_COMPONENT_CLASSES, STRIP_CACHE_LINES, JournalStrips

__all__ = ["H_SCROLL_MIN_COLUMNS", "STRIP_CACHE_LINES", "JournalView"]

#: The fewest columns one → or ← moves a long line (a quarter of the view when that is more).
H_SCROLL_MIN_COLUMNS = 8


class JournalView(ScrollView, can_focus=True):
    """A virtualised, bounded log of journal lines with triage highlighting."""

    COMPONENT_CLASSES = set(JOURNAL_COMPONENT_CLASSES)

    follow: var[bool] = var(True)
    """Stick to the end as lines arrive; off while the user has scrolled up."""

    class FollowChanged(Message):
        """Follow mode turned on or off (the pane shows it in its title)."""

        def __init__(self, follow: bool) -> None:
            super().__init__()
            self.follow = follow

    def __init__(self, *, line_cap: int = 50_000, end_key_is_screens: bool = False, id: str | None = None,
                 classes: str | None = None):
        """Args:
            line_cap: lines kept; older ones drop.
            end_key_is_screens: the screen binds End (journal.follow), so the view's own End binding
                steps aside and the footer shows the screen's once, in its place.
        """
        super().__init__(id=id, classes=classes)
        self.end_key_is_screens = end_key_is_screens
        self.store = JournalStore(line_cap)
        self._width = 0
        self._strips = JournalStrips(lambda name: self.get_component_rich_style(name, partial=True))

    @property
    def search(self) -> re.Pattern[str] | None:
        """The pattern highlighted and stepped through with n and N (None: no search)."""
        return self._strips.search

    # -- storage (JournalStore keeps the lines, this keeps the screen in step) -------------------------
    @property
    def line_cap(self) -> int:
        return self.store.line_cap

    @property
    def line_count(self) -> int:
        """Lines stored (not only the ones the filter shows)."""
        return len(self.store.lines)

    @property
    def row_count(self) -> int:
        return self.store.row_count

    @property
    def lines(self) -> Sequence[JournalLine]:
        return self.store.lines

    @property
    def dropped(self) -> int:
        return self.store.dropped

    @property
    def line_filter(self) -> LineFilter | None:
        return self.store.line_filter

    @property
    def show_probes(self) -> bool:
        return self.store.show_probes

    @property
    def hidden_probes(self) -> int:
        """The console's own probe lines folded out now."""
        return self.store.hidden_probes

    @property
    def cursor_seq(self) -> int | None:
        return self.store.cursor_seq

    @cursor_seq.setter
    def cursor_seq(self, seq: int | None) -> None:
        self.store.cursor_seq = seq

    def line_at_row(self, row: int) -> JournalLine | None:
        seq = self.store.row_seq(row)
        return None if seq is None else self.store.line_by_seq(seq)

    def _row_seq(self, row: int) -> int | None:
        return self.store.row_seq(row)

    def _line_by_seq(self, seq: int) -> JournalLine | None:
        return self.store.line_by_seq(seq)

    def _row_of_seq(self, seq: int) -> int | None:
        return self.store.row_of_seq(seq)

    def append_batch(self, items: Sequence[tuple[str, str, float | None, Finding | None]]) -> None:
        """Store a batch of (text, unit, ts, finding) and refresh once."""
        if not items:
            return
        was_at_end = self.follow
        longest, removed_rows, reordered = self.store.append(items)
        if reordered:
            self._strips.forget()  # late lines moved in among shown ones: their seqs changed
        self._width = max(self._width, longest + 24)
        self.virtual_size = Size(self._width, self.row_count)
        if was_at_end:
            self.scroll_end(animate=False, x_axis=False)
        elif removed_rows > 0:
            # Lines fell off the top: keep the same lines under the user's eyes.
            self.set_scroll(None, max(0, self.scroll_y - removed_rows))
        self.refresh()

    def clear(self) -> None:
        self.store.clear()
        self._strips.forget()
        self.virtual_size = Size(0, 0)
        self.refresh()

    # -- filter, search, findings, cursor -----------------------------------------------------------
    def set_filter(self, line_filter: LineFilter | None) -> None:
        """Show only matching lines (None shows all); stored lines are untouched."""
        self.store.set_filter(line_filter)
        self._after_rows_changed()

    def set_show_probes(self, show: bool) -> None:
        """Show the console's own probe lines, or fold them out (the default)."""
        self.store.set_show_probes(show)
        self._after_rows_changed()

    def set_search(self, pattern: re.Pattern[str] | None) -> None:
        self._strips.set_search(pattern)
        self.refresh()

    def _after_rows_changed(self) -> None:
        self.virtual_size = Size(self._width, self.row_count)
        self._strips.forget()
        if self.cursor_seq is not None and self._row_of_seq(self.cursor_seq) is not None:
            self._scroll_to_cursor()
        elif self.follow:
            self.scroll_end(animate=False, x_axis=False)
        self.refresh()

    @property
    def cursor_line(self) -> JournalLine | None:
        return None if self.cursor_seq is None else self._line_by_seq(self.cursor_seq)

    def move_cursor_to(self, seq: int) -> None:
        self.cursor_seq = seq
        self._strips.forget()
        self._scroll_to_cursor()
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        row = self._row_of_seq(self.cursor_seq) if self.cursor_seq is not None else None
        if row is None:
            return
        height = max(1, self.scrollable_content_region.height)
        if not (self.scroll_y <= row < self.scroll_y + height):
            self.set_follow(False)
            self.scroll_to(y=max(0, row - height // 2), animate=False, immediate=True)

    def _visible_seqs(self) -> list[int]:
        return self.store.visible_seqs()

    def next_finding(self, backwards: bool = False) -> JournalLine | None:
        """Move the cursor to the next (or previous) shown line with a finding."""
        rows = self.store.rows
        shown = set(rows) if rows is not None else None
        seqs = [s for s in self.store.findings if shown is None or s in shown]
        return self._step(seqs, backwards)

    def next_match(self, backwards: bool = False) -> JournalLine | None:
        """Move the cursor to the next (or previous) shown line matching the search."""
        if self.search is None:
            return None
        pattern = self.search
        seqs = [s for s in self._visible_seqs() if pattern.search(self._line_by_seq(s).text)]  # type: ignore[union-attr]
        return self._step(seqs, backwards)

    def _step(self, seqs: list[int], backwards: bool) -> JournalLine | None:
        if not seqs:
            return None
        if self.cursor_seq is None:
            # Start from the view: the nearest one above the bottom, or below the top.
            anchor_row = int(self.scroll_y) + (self.scrollable_content_region.height if backwards else -1)
            anchor = self._row_seq(min(max(anchor_row, 0), self.row_count - 1))
            anchor = anchor if anchor is not None else (seqs[-1] + 1 if backwards else -1)
            if backwards:
                anchor += 1
        else:
            anchor = self.cursor_seq
        if backwards:
            i = bisect_left(seqs, anchor) - 1
            target = seqs[i] if i >= 0 else seqs[-1]
        else:
            i = bisect_left(seqs, anchor + 1)
            target = seqs[i] if i < len(seqs) else seqs[0]
        self.move_cursor_to(target)
        return self._line_by_seq(target)

    def on_click(self, event: Click) -> None:
        """A click selects the line under the mouse (for `c` to copy, `e` to step from)."""
        line = self.line_at_row(int(self.scroll_y) + event.y)
        if line is not None:
            self.cursor_seq = line.seq
            self._strips.forget()
            self.refresh()

    def clear_cursor(self) -> None:
        self.cursor_seq = None
        self._strips.forget()
        self.refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "scroll_end" and self.end_key_is_screens:
            return False
        return super().check_action(action, parameters)

    # -- sideways: a long line moves a quarter of the view per key, not one column -------------------
    def _sideways_step(self) -> int:
        return max(H_SCROLL_MIN_COLUMNS, self.scrollable_content_region.width // 4)

    def action_scroll_right(self) -> None:
        if not self.allow_horizontal_scroll:
            raise SkipAction()
        self.scroll_to(x=self.scroll_x + self._sideways_step(), animate=False)

    def action_scroll_left(self) -> None:
        if not self.allow_horizontal_scroll:
            raise SkipAction()
        self.scroll_to(x=max(0, self.scroll_x - self._sideways_step()), animate=False)

    # -- follow mode ---------------------------------------------------------------------------------
    def set_follow(self, follow: bool) -> None:
        if follow != self.follow:
            self.follow = follow
            self.post_message(self.FollowChanged(follow))
        if follow:
            self.scroll_end(animate=False, x_axis=False)

    def on_resize(self) -> None:
        if self.follow:  # a pane above grew or shrank: the newest line stays in view
            self.scroll_end(animate=False, x_axis=False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        if at_end != self.follow and old_value != new_value:
            self.follow = at_end
            self.post_message(self.FollowChanged(at_end))

    # -- rendering -----------------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.forget_styles()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        line = self.line_at_row(scroll_y + y)
        if line is None:
            return Strip.blank(width, base)
        strip = self._strips.strip_for(line, line.seq == self.cursor_seq, base)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, scroll_y + y)
