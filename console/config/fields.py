"""Typed, line-aware reading of parsed TOML tables for the hosts.toml loader.

tomli reports lines only for syntax errors, so `KeyLocator` scans the file text once for table
headers and key lines. `Table` wraps one parsed table with its key path and turns every problem
into a one-line `ConfigError` naming file:line and the dotted key.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from console.errors import ConfigError

#: A key path inside the document: table names, array-of-tables indices and the key itself.
KeyPath = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BASIC_KEY = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_LITERAL_KEY = re.compile(r"'([^'\n]*)'")
_SPACE = re.compile(r"[ \t]*")


def _parse_dotted_key(text: str, pos: int) -> tuple[list[str], int] | None:
    """Read a dotted TOML key starting at `pos`; None when there is none."""
    parts: list[str] = []
    while True:
        pos = _SPACE.match(text, pos).end()
        if m := _BARE_KEY.match(text, pos):
            parts.append(m.group(0))
        elif m := _BASIC_KEY.match(text, pos):
            try:
                parts.append(json.loads(m.group(0)))
            except ValueError:  # TOML escapes json lacks (\e, \UXXXXXXXX): keep the raw text
                parts.append(m.group(1))
        elif m := _LITERAL_KEY.match(text, pos):
            parts.append(m.group(1))
        else:
            return None
        pos = _SPACE.match(text, m.end()).end()
        if not text.startswith(".", pos):
            return parts, pos
        pos += 1


class KeyLocator:
    """Maps key paths to the line that defines them, from a scan of the file text."""

    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        self._text_lines = text.split("\n")  # TOML lines end at \n only (not at \x85 or \u2028)
        self._scan()

    def _scan(self) -> None:
        table: KeyPath = ()
        array_index: dict[KeyPath, int] = {}  # concrete array-of-tables path -> current element
        closing_quote: str | None = None
        for number, raw in enumerate(self._text_lines, start=1):
            if closing_quote is not None:  # inside a multi-line string: no keys here
                if raw.count(closing_quote) % 2 == 1:
                    closing_quote = None
                continue
            stripped = raw.lstrip()
            start = len(raw) - len(stripped)
            if stripped.startswith("["):
                is_array = stripped.startswith("[[")
                parsed = _parse_dotted_key(raw, start + (2 if is_array else 1))
                if parsed is None:
                    continue
                concrete: KeyPath = ()
                names = parsed[0]
                for position, name in enumerate(names, start=1):
                    concrete += (name,)
                    self._lines.setdefault(concrete, number)
                    if concrete in array_index and (not is_array or position < len(names)):
                        concrete += (array_index[concrete],)
                if is_array:
                    index = array_index.get(concrete, -1) + 1
                    array_index[concrete] = index
                    concrete += (index,)
                    self._lines.setdefault(concrete, number)
                table = concrete
                continue
            parsed = _parse_dotted_key(raw, start)
            if parsed is None or not raw.startswith("=", parsed[1]):
                continue
            path = table
            for name in parsed[0]:
                path += (name,)
                self._lines.setdefault(path, number)
            value = raw[parsed[1] + 1 :]
            for quote in ('"""', "'''"):
                if value.count(quote) % 2 == 1:
                    closing_quote = quote
                    break

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, else of the nearest enclosing key or table, else None."""
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None

    def item_line(self, path: KeyPath, literal: str) -> int | None:
        """The line holding string `literal` in the array at `path` (best effort), else the key's."""
        first = self.line(path)
        if first is None:
            return None
        needles = (json.dumps(literal), f"'{literal}'")
        for number in range(first, min(first + 200, len(self._text_lines)) + 1):
            if any(n in self._text_lines[number - 1] for n in needles):
                return number
        return first


def dotted(path: KeyPath) -> str:
    """`hosts.demo.services.kimi.layouts[2].unit`, quoting keys that are not bare."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            out += f".{name}" if out else name
    return out


def toml_type(value: Any) -> str:
    """The TOML name of a parsed value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date/time"


def url_problem(value: str, *, base: bool = True) -> str | None:
    """What is wrong with an http(s) URL, or None: it needs a host and a port in 1-65535 when it names
    one, and no whitespace or controls; a `base` URL also has no user, query or fragment."""
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a port that is no number, or out of range
    except ValueError as exc:  # "Invalid IPv6 URL" for "http://[::1", "Port out of range 0-65535"
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "expected an http:// or https:// URL"
    if not parts.hostname:
        return "no host in URL"
    if port is None and ":" in parts.netloc.rsplit("]", 1)[-1]:
        return "empty port in URL"
    if port is not None and not 1 <= port <= 65535:
        return f"port {port} out of range 1-65535"
    if "@" in parts.netloc or base and (parts.query or parts.fragment):
        return "a base URL has no user, query or fragment" if base else "a URL here has no user"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 0x7F for ch in value):
        return "whitespace or a control character in URL"
    return None


def value_repr(value: Any, limit: int = 60) -> str:
    """A value for a one-line message: repr escapes newlines; long values are cut."""
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Table:
    """One parsed TOML table, with its key path, read key by key with typed getters."""

    def __init__(self, file: str, locator: KeyLocator, path: KeyPath, data: dict[str, Any]) -> None:
        self.file = file
        self.locator = locator
        self.path = path
        self.data = data

    @property
    def line(self) -> int | None:
        return self.locator.line(self.path)

    def error(self, key: str | int | None, message: str, *, line: int | None = None) -> ConfigError:
        """A ConfigError for `key` of this table (or the table itself when key is None)."""
        path = self.path if key is None else self.path + (key,)
        one_line = " ".join(message.split())  # messages quoting other modules' text stay one line
        return ConfigError(self.file, line or self.locator.line(path), f"{dotted(path)}: {one_line}")

    def check_keys(self, allowed: Iterable[str]) -> None:
        """Refuse keys outside `allowed`, suggesting the closest allowed one."""
        allowed = list(allowed)
        for key in self.data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; known keys: {', '.join(allowed)}"
                raise self.error(key, f"unknown key{hint}")

    def has(self, key: str) -> bool:
        return key in self.data

    def require(self, key: str, why: str = "") -> None:
        if key not in self.data:
            raise self.error(key, f"required key missing{why}")

    def _typed(self, key: str, kinds: tuple[type, ...], expected: str) -> Any:
        value = self.data[key]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise self.error(key, f"expected {expected}, got {toml_type(value)} ({value_repr(value)})")
        return value

    def text(
        self,
        key: str,
        default: str | None = None,
        *,
        required: bool = False,
        choices: Sequence[str] | None = None,
        pattern: re.Pattern[str] | None = None,
        describe: str = "",
    ) -> str | None:
        """A string value; `choices` restricts it, `pattern` must match it fully."""
        if key not in self.data:
            if required:
                self.require(key)
            return default
        value = self._typed(key, (str,), "a string")
        if choices is not None and value not in choices:
            wanted = ", ".join(json.dumps(c) for c in choices)
            raise self.error(key, f"expected one of {wanted}, got {value_repr(value)}")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.error(key, f"{value_repr(value)} is not {describe or 'valid'}")
        return value

    def integer(
        self, key: str, default: int | None = None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        """An integer value within [minimum, maximum]."""
        if key not in self.data:
            return default
        value = self._typed(key, (int,), "an integer")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            low = "" if minimum is None else f" >= {minimum}"
            high = "" if maximum is None else f" <= {maximum}"
            joined = " and".join(p for p in (low, high) if p)
            raise self.error(key, f"expected an integer{joined}, got {value}")
        return value

    def number(
        self,
        key: str,
        default: float | None = None,
        *,
        above: float | None = None,
        maximum: float | None = None,
    ) -> float | None:
        """A finite float (integers accepted) greater than `above` and at most `maximum`."""
        if key not in self.data:
            return default
        value = float(self._typed(key, (int, float), "a number"))
        if not math.isfinite(value) or (above is not None and value <= above) or (
            maximum is not None and value > maximum
        ):
            low = "" if above is None else f" > {above:g}"
            high = "" if maximum is None else f" <= {maximum:g}"
            joined = " and".join(p for p in (low, high) if p)
            raise self.error(key, f"expected a finite number{joined}, got {value_repr(value)}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean value."""
        if key not in self.data:
            return default
        return self._typed(key, (bool,), "true or false")

    def table(self, key: str) -> Table | None:
        """A sub-table, or None when absent."""
        if key not in self.data:
            return None
        return Table(self.file, self.locator, self.path + (key,), self._typed(key, (dict,), "a table"))

    def tables(self, key: str) -> list[tuple[str, Table]]:
        """The sub-tables of table `key` (e.g. every [hosts.NAME]), each type-checked."""
        outer = self.table(key)
        if outer is None:
            return []
        return [(name, outer.table(name)) for name in outer.data]  # type: ignore[misc]
