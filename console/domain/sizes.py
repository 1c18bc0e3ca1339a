"""Byte sizes written and read the way PyTorch's and the engines' messages write them.

PyTorch's CUDA OOM message prints sizes with binary units and two decimals (`672.00 MiB`,
`94.97 GiB`); SGLang prints "GB" but divides by 2**30, so "GB" here is read as GiB too.
"""

from __future__ import annotations

import re

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_UNIT_BYTES = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "kib": KIB,
    "kb": KIB,
    "k": KIB,
    "mib": MIB,
    "mb": MIB,
    "m": MIB,
    "gib": GIB,
    "gb": GIB,
    "g": GIB,
    "tib": TIB,
    "tb": TIB,
    "t": TIB,
}

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


def format_bytes(n: int | float) -> str:
    """Format a byte count the way PyTorch's OOM message does.

    Args:
        n: a size in bytes (negative sizes keep their sign).

    Returns:
        `"672.00 MiB"`, `"94.97 GiB"`, `"512 bytes"` below 1 KiB.
    """
    sign = "-" if n < 0 else ""
    size = abs(n)
    if size < KIB:
        return f"{sign}{int(size)} bytes"
    if size < MIB:
        return f"{sign}{size / KIB:.2f} KiB"
    if size < GIB:
        return f"{sign}{size / MIB:.2f} MiB"
    return f"{sign}{size / GIB:.2f} GiB"


def parse_size(text: str) -> int:
    """Read a size such as `136.94 MiB`, `94.97 GiB`, `81.23 GB` or `512` into bytes.

    Decimal-looking units (KB, MB, GB, TB) are binary here, as in SGLang's log lines.

    Args:
        text: a number with an optional unit.

    Returns:
        The size in bytes, rounded to the nearest byte.

    Raises:
        ValueError: the text is not a size.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = match.groups()
    factor = _UNIT_BYTES.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown size unit {unit!r} in {text!r}")
    return round(float(number) * factor)


def gib(n_bytes: int | float) -> float:
    """Bytes as GiB (a float, not rounded)."""
    return n_bytes / GIB
