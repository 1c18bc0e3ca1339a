"""Host text made safe to show: one sanitiser for everything a host sends that reaches a terminal.

A journal line, an nvidia-smi field, an HTTP error or a name from hosts.toml may carry escape sequences
(OSC 52 writes the clipboard, OSC 0 the window title, CSI 2J clears the screen), C1 controls that some
terminals obey as escapes (U+009B is CSI), bidi controls that reorder what the operator reads (U+202E),
or line breaks that forge a second line. `printable()` turns each into visible escape text, in Python's
own notation: `\\x1b`, `\\x9b`, `\\u202e`, `\\n`. Tab stays a tab. Everything else passes unchanged, so a
clean line costs one `translate()`.

JSON output is not passed through here: `json.dumps` with `ensure_ascii=True` keeps the exact text and
escapes every non-ASCII character, so nothing live reaches the terminal either way.
"""

from __future__ import annotations

from console.domain.redact import redact

#: Line breaks shown by name, the way Python writes them.
_NAMED = {0x0A: "\\n", 0x0D: "\\r"}
#: Bidi controls: embeddings and overrides (U+202A-202E), isolates (U+2066-2069), the marks
#: (U+200E/F, U+061C), plus the Unicode line and paragraph separators (U+2028/9).
_WIDE = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)


def _escape_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)):  # C0, DEL, C1 (U+0085 NEL among them)
        if code != 0x09:
            table[code] = _NAMED.get(code, f"\\x{code:02x}")
    for code in _WIDE:
        table[code] = f"\\u{code:04x}"
    return table


_ESCAPES = _escape_table()


def printable(text: str) -> str:
    """The text with every control, bidi and line-break character written as visible escape text.

    >>> printable("\\x1b]52;c;ZWNobyBoaQ==\\x07 done")
    '\\\\x1b]52;c;ZWNobyBoaQ==\\\\x07 done'
    """
    return text.translate(_ESCAPES)


def is_printable(text: str) -> bool:
    """True when `printable()` would change nothing."""
    return printable(text) == text


def shown(text: str) -> str:
    """Host text as the TUI and the CLI show it: secrets redacted, then made printable."""
    return printable(redact(text))
