"""What the journal view stores and shows per line: the line itself, its marker, and filters.

No Textual here: these are plain values the view and its tests share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from console.domain.redact import redact
from console.domain.safe_text import printable
from console.domain.values import Finding, FindingClass

#: Triage class -> component class suffix and the short marker label shown before the line.
CLASS_STYLE = {
    FindingClass.CUDA_OOM: ("oom", "OOM"),
    FindingClass.KV_CACHE_TOO_SMALL: ("oom", "KV"),
    FindingClass.MEMORY_IN_USE: ("oom", "MEM"),
    FindingClass.NCCL: ("nccl", "NCCL"),
    FindingClass.TRACEBACK: ("traceback", "TRACE"),
    FindingClass.UNIT_FAILED: ("error", "UNIT"),
    FindingClass.ENGINE_INIT: ("error", "INIT"),
    FindingClass.CUDA_GRAPH: ("error", "CUDA GRAPH"),
    FindingClass.PORT_IN_USE: ("error", "PORT"),
    FindingClass.ILLEGAL_MEMORY_ACCESS: ("error", "ILLEGAL ACCESS"),
    FindingClass.WEIGHT_LOAD_ERROR: ("error", "WEIGHTS"),
    FindingClass.NCCL_TIMEOUT: ("nccl", "NCCL TIMEOUT"),
    FindingClass.HOST_OOM: ("oom", "HOST OOM"),
    FindingClass.SHM_EXHAUSTED: ("oom", "SHM"),
    FindingClass.UNSUPPORTED_ARCHITECTURE: ("error", "ARCH"),
    FindingClass.HF_ACCESS: ("error", "HF ACCESS"),
    FindingClass.NO_KERNEL_IMAGE: ("error", "NO KERNEL"),
    FindingClass.QUANTIZATION_UNSUPPORTED: ("error", "QUANT"),
    FindingClass.SEGFAULT: ("error", "SEGFAULT"),
    FindingClass.COMPILE_ERROR: ("error", "COMPILE"),
    FindingClass.CUDA_DRIVER_TOO_OLD: ("error", "DRIVER"),
    FindingClass.MAX_MODEL_LEN: ("error", "MAX LEN"),
    FindingClass.DISK_FULL: ("error", "DISK FULL"),
    FindingClass.GPU_XID: ("error", "XID"),
    FindingClass.ENGINE_ERROR: ("error", "ERROR"),
    FindingClass.ENGINE_DIED: ("error", "DIED"),
    FindingClass.NVSHMEM_INIT: ("nccl", "NVSHMEM"),
    FindingClass.DEEPEP_TIMEOUT: ("nccl", "DEEPEP TIMEOUT"),
    FindingClass.GLOO: ("nccl", "GLOO"),
    FindingClass.ENGINE_WATCHDOG: ("error", "WATCHDOG"),
    FindingClass.KV_TRANSFER: ("error", "KV TRANSFER"),
}


def clean_text(text: str, max_chars: int = 4000) -> str:
    """A journal line as the pane shows it: secrets as `***` (`redact`), every control, C1, bidi and
    line-break character as visible escape text (`printable`, the console's one sanitiser), tabs
    expanded, so a line's cells equal what the terminal shows and nothing in it is live."""
    text = redact(text)
    if text.isprintable() and len(text) <= max_chars:
        return text  # the common case, checked at C speed (isprintable is False for all of those)
    if len(text) > max_chars:
        text = text[:max_chars] + f" … [{len(text) - max_chars} more chars]"
    return printable(text).expandtabs()


def marker_for(finding: Finding) -> str:
    """The short label shown before a finding's line: class, rank, and for OOM its figures."""
    from console.domain.sizes import format_bytes

    _, label = CLASS_STYLE.get(finding.cls, ("error", finding.cls.value.upper()))
    parts = [label]
    if finding.rank and finding.cls != FindingClass.UNIT_FAILED:  # systemd's lines belong to no rank
        parts.append(finding.rank)
    oom = finding.oom
    if oom is not None:
        if oom.gpu is not None:
            parts.append(f"GPU{oom.gpu}")
        if oom.tried_bytes is not None:
            parts.append(f"tried {format_bytes(oom.tried_bytes)}")
        if oom.free_bytes is not None:
            parts.append(f"free {format_bytes(oom.free_bytes)}")
    return " " + " ".join(parts) + " "


class JournalLine(NamedTuple):
    """One stored line: `seq` numbers every line ever received and keys the strip cache.

    A named tuple, not a dataclass: it is built once per journal line, at tens of thousands a second.
    """

    seq: int
    text: str
    unit: str
    ts: float | None = None
    finding: Finding | None = None
    probe: bool = False
    """One of the console's own probe requests in the engine's access log (folded by default)."""

    @property
    def style_key(self) -> str | None:
        if self.finding is None:
            return None
        return CLASS_STYLE.get(self.finding.cls, ("error", ""))[0]


@dataclass(frozen=True, slots=True)
class LineFilter:
    """What `/` typed: a regex over the text, or `class:NAME` (oom, nccl, traceback, error, finding)."""

    text: str
    regex: re.Pattern[str] | None = None
    style_key: str | None = None

    @classmethod
    def parse(cls, text: str) -> LineFilter:
        """Parse the filter text; raises `re.error` for a bad regex."""
        text = text.strip()
        if text.startswith("class:"):
            return cls(text, style_key=text[len("class:") :].strip().lower() or "finding")
        return cls(text, regex=re.compile(text, re.IGNORECASE))

    def matches(self, line: JournalLine) -> bool:
        if self.style_key is not None:
            if line.finding is None:
                return False
            return self.style_key in ("finding", line.style_key, line.finding.cls.value)
        assert self.regex is not None
        return self.regex.search(line.text) is not None
