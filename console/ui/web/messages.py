"""The browser's websocket messages, read strictly: textual-serve's protocol, sizes clamped.

textual-serve's own reader took any JSON and indexed into it: `["stdin", 5]` raised an AttributeError out of
the handler (a traceback on the server's stderr per message), and `["resize", {"width": 12000, "height":
12000}]` was passed on as it came (a read-only visitor's app took 881 MB, the server 468 MB, in 33 s). Here a
message is one of the protocol's shapes or it is refused with a reason; a terminal size is clamped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: The largest terminal a browser may ask for (a 4K screen at a small font is about 550 x 155).
MAX_COLUMNS = 600
MAX_ROWS = 200
MIN_COLUMNS = 10
MIN_ROWS = 4
#: The longest text one message may carry (a paste); textual-serve's page sends keys one by one.
MAX_TEXT_CHARS = 65536


@dataclass(frozen=True)
class Message:
    """One message: its type and, for stdin, its text; for resize, the clamped size; for ping, its data."""

    kind: str
    text: str = ""
    columns: int = 0
    rows: int = 0
    ping: str | int | float | None = None


class BadMessage(ValueError):
    """A message that is not textual-serve's protocol; its text says why, in a few words."""


def clamp_size(columns: int, rows: int) -> tuple[int, int]:
    return max(MIN_COLUMNS, min(MAX_COLUMNS, columns)), max(MIN_ROWS, min(MAX_ROWS, rows))


def parse(raw: str) -> Message | None:
    """The message in `raw`; None for a type the console does not use.

    Raises:
        BadMessage: not JSON, not a list, or fields of the wrong type.
    """
    try:
        envelope = json.loads(raw)
    except ValueError:
        raise BadMessage("not JSON") from None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        raise BadMessage("not a [type, ...] list")
    kind, args = envelope[0], envelope[1:]
    if kind == "stdin":
        if len(args) != 1 or not isinstance(args[0], str):
            raise BadMessage("stdin without its text")
        if len(args[0]) > MAX_TEXT_CHARS:
            raise BadMessage(f"stdin of more than {MAX_TEXT_CHARS} characters")
        return Message("stdin", text=args[0])
    if kind == "resize":
        data = args[0] if len(args) == 1 else None
        if not isinstance(data, dict) or not all(_is_int(data.get(k)) for k in ("width", "height")):
            raise BadMessage("resize without a whole width and height")
        columns, rows = clamp_size(data["width"], data["height"])
        return Message("resize", columns=columns, rows=rows)
    if kind == "ping":
        data = args[0] if args else None
        if not (data is None or isinstance(data, (str, int, float))) or isinstance(data, bool):
            raise BadMessage("ping with other than a string or a number")
        if isinstance(data, str) and len(data) > 256:
            raise BadMessage("ping of more than 256 characters")
        return Message("ping", ping=data)
    if kind in ("blur", "focus"):
        return Message(kind)
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
