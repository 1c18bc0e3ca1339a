"""`serve-console triage [FILE|-] [--json] [--engine sglang|vllm]`: what went wrong in this log?

Reads a pasted journal, a log file or stdin (only when stdin is not a terminal), and prints the
decisive finding first: the root cause, what to do about it, and the findings it explains; then
every finding, one per line: its class, rank and a plain summary, followed by the log line number
and the start-up phase it happened in (when the log shows one). A clean log prints
`no findings in N lines`. With `--json`, one JSON object per finding (`Finding.to_json()`), the
decisive one first with `"decisive": true`. Exit codes: 0 no fatal finding, 1 a fatal finding,
2 an unreadable file or no input.

A log that holds several starts of the unit (systemd's `Started ...`, or the engine's first line
again) is read start by start: the decisive finding is the last start's, and the exit code says how
the last start ended; every finding is still listed, with its start, and each earlier start's own
cause is named in one line. No finding of one start explains another's.

An incident bundle (docs/bundle.md) is read as the failed start's journal: the lines of its unit on
every node, in time order, up to its rollback; its engine is the bundle's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import IO, Any

from console.domain.values import Engine, Finding, FindingClass, Phase

#: `serve-console tail`'s mark under a line with findings: `>> cuda_oom TP2 EP1: CUDA OOM on GPU 2 ...`.
_TAIL_MARK = re.compile(r">> (?:" + "|".join(c.value for c in FindingClass) + r")(?: [\w ]{1,40})?: ")
#: Longer lines are read in pieces of this many bytes, so one endless line cannot exhaust memory.
MAX_LINE_BYTES = 4 << 20


def add_parser(subparsers: Any) -> None:
    """Add the `triage` subcommand."""
    parser = subparsers.add_parser(
        "triage",
        help="name what killed the engine in an engine or journal log",
        description="Name the root cause of a failure in an SGLang/vLLM/systemd log (CUDA OOM with its "
        "figures, KV cache too small, NCCL, port in use, Hugging Face access, segfault, ...), with what to do "
        "about it, then list every finding. Reads stdin when no file is named and stdin is not a terminal.",
    )
    parser.add_argument("file", nargs="?", default=None, metavar="FILE", help="the log to read; - for stdin")
    parser.add_argument("--json", action="store_true", help="one JSON object per finding, the decisive one first")
    parser.add_argument(
        "--engine",
        choices=("sglang", "vllm"),
        help="the engine that wrote the log, for the start-up phase of each finding (default: guessed)",
    )
    parser.set_defaults(func=run, usage=parser.format_usage)


def run(args: argparse.Namespace) -> int:
    """Triage the log; print the decisive finding, then every finding; 1 if one is fatal."""
    from console.domain.phases import PhaseTracker
    from console.domain.triage import Triager
    from console.errors import UsageError

    path = args.file
    if path is None:
        if sys.stdin is None or sys.stdin.isatty():
            sys.stderr.write(args.usage())
            sys.stderr.write("triage: name a log file, or pipe one in (journalctl -u UNIT | serve-console triage)\n")
            return 2
        path = "-"
    bundle = _bundle_or_none(path)
    if bundle is not None and args.engine is None:
        args.engine = bundle.header.get("engine")
    engine = Engine(args.engine) if args.engine else None
    triager = Triager(engine)
    tracker = PhaseTracker(engine) if engine else None
    where: dict[int, Place] = {}  # a finding's seq -> its line, start and phase
    recent: deque[tuple[int, Place]] = deque(maxlen=256)  # (seq, place) of the last lines: findings come late
    findings: list[Finding] = []
    starts: list[tuple[int, int]] = [(0, 1)]  # (seq, line number) where each start began
    lines = 0
    try:
        with _open(path) if bundle is None else nullcontext(None) as stream:
            for number, line in _lines(stream) if stream is not None else _bundle_lines(bundle):
                lines = number
                if _TAIL_MARK.match(line):
                    continue  # `serve-console tail`'s mark of a finding on the line above: tail's words, not the log's
                if tracker is None and (guess := guess_engine(line)) is not None:
                    tracker = PhaseTracker(guess)
                if tracker is not None:
                    tracker.feed(line, 0.0)
                found = triager.feed(line)
                if triager.start.starts > len(starts):
                    starts.append((triager.start.began_at, number))
                phase = tracker.phase.value if tracker is not None and tracker.phase is not Phase.STOPPED else None
                recent.append((triager.lines_read, Place(number, len(starts), phase)))
                _place(found, recent, where)
                findings += found
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if lines == 0:
        raise UsageError(f"{'stdin' if path == '-' else path}: the log is empty: nothing to triage")
    found = triager.finish()
    _place(found, recent, where)
    findings += found
    # An exception its writer went on serving after is a note, not what ended the engine.
    findings = [triager.revised.get(f.seq, f) if f.seq is not None else f for f in findings]
    top = triager.decisive()  # the last start's
    if bundle is not None and not args.json:
        _print_bundle(bundle)
    if args.json:
        _print_json(top, findings, where, starts)
    else:
        _print_text(top, findings, where, lines, starts)
    sys.stdout.flush()
    return 1 if top is not None else 0


@dataclass(frozen=True, slots=True)
class Place:
    """Where a finding's line is: its number in the file, the start it belongs to, its start-up phase."""

    line_no: int
    start: int
    phase: str | None

    def text(self, several_starts: bool) -> str:
        start = f", start {self.start}" if several_starts else ""
        return f"line {self.line_no}{start}" + (f", {self.phase}" if self.phase else "")


def _place(found: list[Finding], recent: Iterable[tuple[int, Place]], where: dict[int, Place]) -> None:
    """Remember where each finding's line is, while that line is still among the recent ones."""
    for finding in found:
        if finding.seq is not None:
            for seq, here in reversed(list(recent)):
                if seq == finding.seq:
                    where[finding.seq] = here
                    break


def _print_text(
    top: Finding | None, findings: list[Finding], where: dict[int, Place], lines: int, starts: list[tuple[int, int]]
) -> None:
    from console.domain.safe_text import shown

    several = len(starts) > 1
    if not findings and top is None:
        print(f"no findings in {lines} lines")
        return
    if top is not None:
        print(f"{top.cls.value:<21} {shown(top.rank or '-'):<11} {shown(top.summary)}  ({_where(top, where, several)})")
        print(f"  what to do: {shown(top.hint or '')}")
        if top.context is not None:
            print(f"  while: {top.context.value}")
        if top.consequences:
            folded = ", ".join(f"{c.cls.value} ({_where(c, where, several)})" for c in top.consequences[:8])
            more = f" and {len(top.consequences) - 8} more" if len(top.consequences) > 8 else ""
            print(f"  which explains: {folded}{more}")
        if several:
            print(f"  in {_starts_text(findings, where, starts)}")
        print("all findings:")
    elif several:
        print(f"no fatal finding in {_starts_text(findings, where, starts)}; all findings:")
    else:
        print(f"no fatal finding in {lines} lines; notes:")
    for f in findings:
        print(f"{f.cls.value:<21} {shown(f.rank or '-'):<11} {shown(f.summary)}  ({_where(f, where, several)})")


def _starts_text(findings: list[Finding], where: dict[int, Place], starts: list[tuple[int, int]]) -> str:
    """`the last of 3 starts (from line 60); earlier: start 1 cuda_oom (line 30), ...`: each earlier
    start's own decisive finding, never linked to another start's."""
    from console.domain.triage import decisive

    earlier = []
    for number in range(1, len(starts)):
        own = decisive([f for f in findings if _start_of(f, starts) == number])
        earlier.append(f"start {number} " + (f"{own.cls.value} ({_where(own, where, False)})" if own else "no fatal finding"))
    return f"the last of {len(starts)} starts (from line {starts[-1][1]}); earlier: {', '.join(earlier)}"


def _start_of(finding: Finding, starts: list[tuple[int, int]]) -> int:
    """The start (1, 2, ...) a finding belongs to: the last one begun at or before its line."""
    if finding.seq is None:
        return len(starts)
    return sum(1 for began, _line in starts if began <= finding.seq)


def _print_json(
    top: Finding | None, findings: list[Finding], where: dict[int, Place], starts: list[tuple[int, int]]
) -> None:
    # ensure_ascii: exact text, and no C1 or bidi character live
    if top is not None:
        print(json.dumps({**_json(top, where, starts), "decisive": True}))
    for f in findings:
        if top is not None and f.seq == top.seq and f.line == top.line:
            continue  # printed first, as the decisive finding
        print(json.dumps({**_json(f, where, starts), "decisive": False}))


def _json(finding: Finding, where: dict[int, Place], starts: list[tuple[int, int]]) -> dict[str, Any]:
    data = finding.to_json()
    here = where.get(finding.seq) if finding.seq is not None else None
    if here is not None:
        data["line_no"] = here.line_no
    data["start"] = _start_of(finding, starts)
    return data


def _where(finding: Finding, where: dict[int, Place], several_starts: bool) -> str:
    here = where.get(finding.seq) if finding.seq is not None else None
    return here.text(several_starts) if here is not None else "end of log"


def guess_engine(line: str) -> Engine | None:
    """The engine a line reveals, or None: vLLM's process prefixes or banner, SGLang's start lines."""
    if "(APIServer pid=" in line or "(EngineCore" in line or "vLLM" in line or "(Worker_" in line:
        return Engine.VLLM
    if "server_args=ServerArgs(" in line or "Init torch distributed begin" in line or "sglang" in line:
        return Engine.SGLANG
    return None


def _bundle_or_none(path: str) -> Any:
    """The bundle at `path`, when the file is one (gzip's magic); None for a plain log.

    Raises:
        BundleError: a gzip file that is not a whole bundle (one line naming the file).
    """
    from pathlib import Path

    if path == "-":
        return None
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except OSError:
        return None  # the log's own open says why, as for any log
    if magic != b"\x1f\x8b":
        return None
    from console.ops.bundle import read_bundle

    return read_bundle(Path(path))


def _bundle_lines(bundle: Any) -> Iterator[tuple[int, str]]:
    """The failed start's journal in a bundle: its unit's lines on every node, in time order, until its
    rollback began (the rollback's own start is another story)."""
    incident = bundle.incident
    unit, until = incident.get("unit"), incident.get("ended_at")
    number = 0
    for record in bundle.timeline:
        if record["record"] != "journal" or (unit and record.get("unit") != unit):
            continue
        if until is not None and record["ts"] >= until:
            break
        number += 1
        yield number, str(record.get("message", ""))


def _print_bundle(bundle: Any) -> None:
    from console.domain.safe_text import shown

    incident, verdict = bundle.incident, bundle.verdict() or {}
    live = (verdict.get("failure") or {}).get("class") or verdict.get("outcome") or "?"
    print(shown(f"bundle {bundle.path}: {incident.get('unit')} on {bundle.header.get('host')}; "
                f"the console said {live}: {incident.get('reason', '')}"))


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
