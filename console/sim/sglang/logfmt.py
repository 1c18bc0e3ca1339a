"""How SGLang's processes write their lines: `[2026-11-29 10:00:00 TP0] message`, uvicorn under its logger.

Every line is flushed as it is written: the journal (or the test reading the pipe) sees it at once.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from console.sim.logfmt import Rank


class EngineLog:
    """Writes SGLang-style lines to stdout, one flush per line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def raw(self, text: str) -> None:
        """Write text as is (a traceback body, a tqdm bar, a c10d line), newline added."""
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; keep running like a daemon would

    def log(self, message: str, rank: Rank | None = None) -> None:
        """A logger line: `[2026-11-29 10:00:00 TP0] message` (no rank part for the launcher)."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.raw(f"[{stamp}{rank.prefix if rank else ''}] {message}")

    def uvicorn(self, level: str, message: str) -> None:
        """A uvicorn line as SGLang configures it: `[time] INFO:     message`."""
        self.log(f"{(level + ':').ljust(9)} {message}")
