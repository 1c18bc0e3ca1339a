"""Lines a terminal hard-wrapped at its width, read whole again.

A log copied from a terminal (or `kubectl logs` in a narrow pane) arrives cut into pieces of exactly
the terminal's width, the rest of each message on a line with no prefix of its own, often mid-word
(`... code: -98, name: EAD` / `DRINUSE, message: address already in use`). A signature that needs
the whole message misses both pieces.

The width is learned from the log itself: a length of at least WRAP_WIDTH that recurs REPEATS times
is the width it was wrapped at. After a line of exactly that length, an untagged next line that does
not start a traceback's structure is its continuation. Only those lines take the slow path; a live
journal, whose lines are whole, pays a few comparisons of lengths and openings a line (about 0.27 µs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from console.domain.log_origin import is_request_text
from console.domain.rank import LineHeader, split_header
from console.domain.triage.normalise import WRAP_WIDTH, exception_name, is_frame

#: A length seen this many times (each at least WRAP_WIDTH) is the width the log was wrapped at.
REPEATS = 3
_MAX_WIDTHS = 512  # distinct lengths counted before counting stops (a long log of varied lines)
_MAX_PIECES = 8
_MAX_TEXT = 4000
#: Openings of lines that carry a writer's prefix of their own, so are no rest (checked before the
#: slow parse): vLLM's process prefixes, SGLang's and ISO timestamps, log levels.
_OWN_PREFIXES = ("(APIServer", "(EngineCore", "(VllmWorker", "(Worker", "(RayWorker", "[20", "INFO", "ERROR",
                 "WARNING", "DEBUG")
#: Line openings that are a traceback's structure, never the rest of a message.
_STRUCTURE = ("Traceback (most recent call last):", 'File "', "During handling of the above exception",
              "The above exception was the direct cause", "frame #", "Exception raised from")


class WrapWidth:
    """The width a log was hard-wrapped at, learned from the lengths of its lines (0 until known)."""

    __slots__ = ("_counts", "width")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.width = 0

    def note(self, length: int) -> None:
        """Count one line's length (without its newline); call it only for lines of WRAP_WIDTH or more,
        and only until a width is known."""
        seen = self._counts.get(length, 0) + 1
        if seen >= REPEATS:
            self.width = length
        elif len(self._counts) < _MAX_WIDTHS:
            self._counts[length] = seen


@dataclass(slots=True)
class Joined:
    """A message being reassembled from its wrapped pieces: its first line's header and its text."""

    header: LineHeader
    line: str
    text: str
    pieces: int = 1

    def add(self, piece: str) -> bool:
        """Append the next piece as it was cut (a terminal keeps every character); False when full."""
        if self.pieces >= _MAX_PIECES or len(self.text) >= _MAX_TEXT:
            return False
        if not self.text:
            piece = piece.lstrip()  # the message after a line that was its prefix alone
        self.text += piece
        self.line += piece
        self.pieces += 1
        return True


def continues_wrap(header: LineHeader) -> bool:
    """Whether a line after a full-width line is that line's rest: no prefix of its own, and not a
    traceback's marker, frame or chain line, nor an exception's final line."""
    payload = header.payload
    if header.tagged or not payload.strip():
        return False
    stripped = payload.lstrip()
    if stripped.startswith(_STRUCTURE):
        return False
    return not (exception_name(payload) and ": " in payload[:120] and payload[:1].isupper())


def join_rest(joined: Joined | None, prev: str, header: LineHeader) -> Joined | None:
    """The message with this line, the rest of the full-width line before it, added; None when this
    line is no such rest (or the message is as long as it may grow).

    Args:
        joined: The message reassembled so far, when the line before was itself a rest.
        prev: The line before (a full-width line).
        header: This line's header.
    """
    if not continues_wrap(header):
        return None
    if joined is None:
        first = prev.rstrip("\r\n")
        prev_header = split_header(first, deep=True)
        if prev_header.payload and is_frame(prev_header.payload):
            return None  # a frame's rest: its traceback reads it (normalise.Block.note_frame)
        if is_request_text(prev_header.payload):
            return None  # a client's text is never the head of a message
        joined = Joined(prev_header, first, prev_header.payload)
    return joined if joined.add(header.payload) else None


class WrapReader:
    """Which lines may be the rest of the line before, and the message they make together.

    Attributes:
        widths: The width the log was hard-wrapped at, as learned so far.
        joined: The message being reassembled, while each piece fills the width.
        open_head: Set by the Triager when the line it just read was long, gated and unexplained.
    """

    __slots__ = ("joined", "open_head", "prev_len", "widths")

    def __init__(self) -> None:
        self.widths = WrapWidth()
        self.joined: Joined | None = None
        self.open_head = False
        self.prev_len = 0

    def may_be_rest(self, line: str, prev: str) -> bool:
        """Whether `line` may continue `prev`, from lengths and openings alone (every line calls it):
        `prev` filled the learned width, or was long and a prefix alone (`... [multiproc_executor.py:511]`)
        or unexplained. A line that opens as `prev` did carries the same prefix, so it is no rest: the
        cheap test that keeps a journal of same-length access lines on the fast path."""
        length, prev_len, width = len(line), self.prev_len, self.widths.width
        if length >= WRAP_WIDTH:
            length = line_length(line)
            if not width:
                self.widths.note(length)  # learned once: a log is pasted from one terminal
        self.prev_len = length
        open_head = self.open_head
        if open_head:
            self.open_head = False
        rest = (
            (prev_len == width or prev_len >= WRAP_WIDTH and (open_head or prev[prev_len - 1] == "]"))
            and prev_len > 0 and line[:4] != prev[:4] and not line.startswith(_OWN_PREFIXES)
        )
        if not rest and self.joined is not None:
            self.joined = None
        return rest

    def read_rest(self, prev: str, header: LineHeader) -> tuple[str, LineHeader] | None:
        """The message `prev` and this line make (its line, and a header whose payload is the whole
        text); None when this line is no rest after all."""
        joined = self.joined = join_rest(self.joined, prev, header)
        if joined is None:
            return None
        if self.prev_len != self.widths.width:
            self.joined = None  # a short piece ends the message
        return joined.line, replace(joined.header, payload=joined.text)


def line_length(line: str) -> int:
    """A line's length without its line ending (no copy of a 1 MB line)."""
    n = len(line)
    if n and line[n - 1] == "\n":
        n -= 1
    if n and line[n - 1] == "\r":
        n -= 1
    return n


__all__ = ["REPEATS", "WRAP_WIDTH", "Joined", "WrapReader", "WrapWidth", "continues_wrap", "join_rest", "line_length"]
