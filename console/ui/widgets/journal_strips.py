"""How a journal line looks: its triage colours, its search highlights, and the cache of its strips.

The journal view decides which line sits on which row and where the view is; this module decides what
one line looks like once it is there. The seam runs between the two because the look depends only on
the line, whether the cursor is on it, the search pattern and the theme, so the rendered strips can be
cached by (seq, cursor) and thrown away whole when the search or the theme changes, without the view
knowing how a strip is put together.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

from console.ui.widgets.journal_lines import JournalLine, marker_for

#: Rendered lines kept (a screenful or two, with and without the cursor). Each cached line holds
#: about three Textual strips with seven small caches each; 2048 lines kept ~100k objects alive for
#: the garbage collector to walk, for no gain under a flood where every frame shows new lines.
STRIP_CACHE_LINES = 256

#: The component classes a journal line is drawn with; the theme gives each its colours.
JOURNAL_COMPONENT_CLASSES = frozenset({
    "journal--oom",
    "journal--nccl",
    "journal--traceback",
    "journal--error",
    "journal--marker-oom",
    "journal--marker-nccl",
    "journal--marker-traceback",
    "journal--marker-error",
    "journal--cursor",
    "journal--match",
    "journal--unit",
})


class JournalStrips:
    """Journal lines rendered to strips, kept in a bounded cache keyed by (seq, is the cursor on it).

    Drop the cache (`forget`) whenever what a line looks like changes for a reason the key does not
    hold: the search, the theme, or lines whose seqs were given to other lines.
    """

    def __init__(self, component_style: Callable[[str], Style], cache_lines: int = STRIP_CACHE_LINES):
        """Args:
            component_style: the widget's partial rich style for one component class name.
            cache_lines: rendered lines kept.
        """
        self._component_style = component_style
        self._cache: LRUCache[tuple[int, bool], Strip] = LRUCache(cache_lines)
        self._styles: dict[str, Style] = {}
        self.search: re.Pattern[str] | None = None

    def forget(self) -> None:
        """Drop every rendered line; the next frame renders the ones it shows afresh."""
        self._cache.clear()

    def forget_styles(self) -> None:
        """The theme or the widget's styles changed: look the colours up again, and re-render."""
        self._styles.clear()
        self._cache.clear()

    def set_search(self, pattern: re.Pattern[str] | None) -> None:
        """Highlight what `pattern` matches (None highlights nothing)."""
        self.search = pattern
        self._cache.clear()

    def strip_for(self, line: JournalLine, is_cursor: bool, base: Style) -> Strip:
        """The whole line rendered (uncropped), from the cache when it is there."""
        key = (line.seq, is_cursor)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._render(line, is_cursor, base)
        return strip

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self._component_style(name)
        return style

    def _render(self, line: JournalLine, is_cursor: bool, base: Style) -> Strip:
        style = base
        key = line.style_key
        segments: list[Segment] = []
        if key is not None:
            style = base + self._style(f"journal--{key}")
            assert line.finding is not None
            segments.append(Segment(marker_for(line.finding), base + self._style(f"journal--marker-{key}")))
            segments.append(Segment(" ", style))
        if is_cursor:
            style = style + self._style("journal--cursor")
        segments.extend(self._text_segments(line.text, style))
        return Strip(segments)

    def _text_segments(self, text: str, style: Style) -> list[Segment]:
        if self.search is None:
            return [Segment(text, style)]
        match_style = style + self._style("journal--match")
        out: list[Segment] = []
        pos = 0
        for m in self.search.finditer(text):
            if m.end() == m.start():
                continue
            out.append(Segment(text[pos : m.start()], style))
            out.append(Segment(m.group(), match_style))
            pos = m.end()
        out.append(Segment(text[pos:], style))
        return out
