"""`serve-console triage [FILE|-] [--json] [--engine sglang|vllm]`: what went wrong in this log?

Reads a pasted journal, a log file or stdin, and prints one line per finding: its class, rank and
a plain summary, followed by the log line number and the start-up phase it happened in (when the
log shows one). With
`--json`, one JSON object per finding (`Finding.to_json()`). Exit codes: 0 no findings (nothing is
printed), 1 findings, 2 an unreadable file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import IO, Any

from console.domain.models import Engine, Phase

#: Longer lines are read in pieces of this many bytes, so one endless line cannot exhaust memory.
MAX_LINE_BYTES = 4 << 20


def add_parser(subparsers: Any) -> None:
    """Add the `triage` subcommand."""
    parser = subparsers.add_parser(
        "triage",
        help="classify the failures in an engine or journal log",
        description="Classify the failures in an SGLang/vLLM/systemd log: CUDA OOM (with its figures), "
        "KV cache too small, NCCL, port in use, unit failures ...",
    )
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="the log to read; - for stdin (default)")
    parser.add_argument("--json", action="store_true", help="one JSON object per finding")
    parser.add_argument(
        "--engine",
        choices=("sglang", "vllm"),
        help="the engine that wrote the log, for the start-up phase of each finding (default: guessed)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Triage the log; print the findings; 1 if there are any."""
    from console.domain.phases import PhaseTracker
    from console.domain.text import shown
    from console.domain.triage import Triager
    from console.errors import UsageError

    engine = Engine(args.engine) if args.engine else None
    triager = Triager(engine)
    tracker = PhaseTracker(engine) if engine else None
    found = 0
    try:
        with _open(args.file) as stream:
            for number, line in _lines(stream):
                if tracker is None and (guess := guess_engine(line)) is not None:
                    tracker = PhaseTracker(guess)
                if tracker is not None:
                    tracker.feed(line, 0.0)
                for finding in triager.feed(line):
                    found += 1
                    if args.json:  # ensure_ascii: exact text, and no C1 or bidi character live
                        print(json.dumps(finding.to_json()))
                    else:
                        where = f"line {number}"
                        if tracker is not None and tracker.phase is not Phase.STOPPED:
                            where += f", {tracker.phase.value}"
                        print(f"{finding.cls.value:<21} {shown(finding.rank or '-'):<11} {shown(finding.summary)}  ({where})")
    except OSError as exc:
        raise UsageError(f"{args.file}: {exc.strerror or exc}") from None
    sys.stdout.flush()
    return 1 if found else 0


def guess_engine(line: str) -> Engine | None:
    """The engine a line reveals, or None: vLLM's process prefixes or banner, SGLang's start lines."""
    if "(APIServer pid=" in line or "(EngineCore" in line or "vLLM" in line or "(Worker_" in line:
        return Engine.VLLM
    if "server_args=ServerArgs(" in line or "Init torch distributed begin" in line or "sglang" in line:
        return Engine.SGLANG
    return None


def _open(path: str) -> AbstractContextManager[IO[bytes]]:
    if path == "-":
        return nullcontext(sys.stdin.buffer)  # stdin is read, never closed
    return open(path, "rb")


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line; invalid UTF-8 is replaced, tqdm's `\\r` updates are split."""
    number = 0
    while raw := stream.readline(MAX_LINE_BYTES):
        number += 1
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if "\r" in text:
            for part in text.split("\r"):
                if part:
                    yield number, part
        else:
            yield number, text
