"""NCCL RAS's `STATUS` report (NCCL 2.24+, text format of 2.27), read for which nodes' processes are
missing or dead (docs/ras.md has the protocol, the report and real samples).

RAS lists a process that sent nothing to its collective under `INCOMPLETE` (its connection is down or
silent for 5 s: a crash, a wedge) and one unreachable for 60 s under `DEAD`, each as `Process PID on node
IP managing GPU G`; per communicator it names the ranks it misses: `Rank R -- GPU G managed by process PID
on node IP`. Only outliers are listed one by one (a count of at most 10, every one with VERBOSE STATUS);
a larger count names no node, and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_VERSION = re.compile(r"^NCCL version (\S+)")
_SUMMARY_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
_PROCESS = re.compile(r"^\s+Process (\d+) on node (\S+) managing GPU ([0-9, ()NVML]+)")
_RANK = re.compile(r"^\s+Rank (\d+) -- GPU \S+ managed by process \d+ on node (\S+)")
_COUNT = re.compile(r"^\s+(\d+) job process(?:es)? (?:is|are) considered dead")
_MISSING = re.compile(r"^\s+Missing communicator data from (\d+) job process")
_COMM_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+\S+\s+\d+\s+\d+\s+(\w+)\s+(\S+)\s*$")
#: Where the text is untrusted (another host's daemon): a report is bounded, lines too.
MAX_REPORT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class RasReport:
    """What one RAS `STATUS` says of the job."""

    version: str | None
    nodes: int | None
    processes: int | None
    missing: dict[str, int] = field(default_factory=dict)
    """Node address -> processes listed under INCOMPLETE (sent nothing: down, or silent for 5 s)."""
    dead: dict[str, int] = field(default_factory=dict)
    """Node address -> processes listed under DEAD (unreachable for 60 s)."""
    missing_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Node address -> the ranks communicators miss there."""
    unnamed: int = 0
    """Missing or dead processes counted but not listed one by one (more than 10 of them)."""
    errors: tuple[str, ...] = ()
    """The communicators' error column, where it is not OK (INCOMPLETE, ERROR, MISMATCH)."""

    @property
    def healthy(self) -> bool:
        """No process missing or dead, no communicator in error (a MISMATCH of operation counts is a
        straggler in flight, not a death)."""
        return not (self.missing or self.dead or self.unnamed or set(self.errors) - {"MISMATCH"})


def parse_ras_status(text: str) -> RasReport:
    """The report of a `STATUS` (or `VERBOSE STATUS`) answer.

    Raises:
        ValueError: the text is not a RAS report (no `NCCL version` header, no job summary).
    """
    lines = text[:MAX_REPORT_BYTES].splitlines()
    version = next((m[1] for line in lines if (m := _VERSION.match(line))), None)
    if version is None and not any(line.startswith("Job summary") for line in lines):
        raise ValueError(f"not an NCCL RAS report: {lines[0][:80] if lines else 'nothing'}")
    nodes = processes = None
    section = None
    missing: dict[str, int] = {}
    dead: dict[str, int] = {}
    ranks: dict[str, list[int]] = {}
    counted = listed = 0
    kind = "missing"
    errors: list[str] = []
    for line in lines:
        word = line.strip()
        if word in ("Job summary", "Errors", "Warnings") or word.startswith("Communicators"):
            section = word.split("...")[0]
            continue
        if section == "Job summary" and nodes is None and (m := _SUMMARY_ROW.match(line)):
            nodes, processes = int(m[1]), int(m[4])
        elif section == "Communicators" and (m := _COMM_ROW.match(line)) and m[2] != "OK":
            errors += m[2].split(",")
        elif section == "Errors":
            if word in ("INCOMPLETE", "DEAD") or word.startswith("#"):
                kind = "dead" if word == "DEAD" else "rank" if word.startswith("#") else "missing"
            elif (m := _MISSING.match(line)) or (m := _COUNT.match(line)):
                counted += int(m[1]) if kind != "rank" else 0
            elif (m := _PROCESS.match(line)):
                target = dead if kind == "dead" else missing
                target[m[2]] = target.get(m[2], 0) + 1
                listed += 1
            elif (m := _RANK.match(line)):
                ranks.setdefault(m[2], []).append(int(m[1]))
    return RasReport(version, nodes, processes, missing, dead,
                     {node: tuple(sorted(r)) for node, r in ranks.items()}, max(counted - listed, 0),
                     tuple(dict.fromkeys(errors)))  # fmt: skip
