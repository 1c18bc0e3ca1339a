"""Log line headers: the journal's syslog prefix, the engines' rank prefixes, vLLM's level prefix.

A journal line may look like any of these (the parts are optional and stack in this order):

    May 26 00:06:20 gpu-node-1 python3[1234]: [2026-05-26 00:06:20 DP0 TP3 EP3] Load weight begin.
    May 26 00:06:20 gpu-node-1 python3[1234]: (Worker_TP1_EP1 pid=1301) ERROR 05-26 00:06:20 [x.py:5] ...

All patterns are anchored (`match` at a position), so a 1 MB line costs no more than a short one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `journalctl -o short` / `short-precise` / `short-iso`: "<time> <host> <ident>[<pid>]: ".
_SYSLOG = re.compile(
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" (?P<host>\S+) (?P<ident>[^\s\[\]]{1,64}?)(?:\[(?P<pid>\d+)\])?: "
)
# vLLM prefixes every line a child process writes: "(Worker_TP1_EP1 pid=1301) ".
_VLLM_PROC = re.compile(r"\((?P<proc>[A-Za-z][^()\n]{0,60}?) pid=(?P<pid>\d+)\) ?")
# vLLM's logger: "ERROR 05-26 00:06:20 [core.py:708] " (older: "ERROR 05-26 00:06:20 core.py:708] ").
_VLLM_LEVEL = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]\n]{1,80}\]|[\w.]{1,80}:\d+\]) ?"
)
# SGLang's logger: "[2026-05-26 00:06:20 DP0 TP3 EP3] " (no rank part in the launcher process).
_SGLANG = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<ranks>(?: [A-Z][A-Z_]{0,8}\d{1,5}){0,6})\] ?"
)
# PyTorch's c10d lines: "[rank2]:[E526 00:16:20.123456789 ProcessGroupNCCL.cpp:632] ".
_TORCH_RANK = re.compile(r"\[rank(?P<rank>\d{1,5})\]:")
_GLOG = re.compile(r"\[[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)? (?:\d+ )?[\w.]{1,80}:\d+\] ?")
# Colour codes, as vLLM writes them when its output is a terminal.
_ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
_PROC_RANK = re.compile(r"(?<![A-Za-z0-9])((?:DP|PP|TP|EP|DCP|PCP)\d{1,5})(?![A-Za-z0-9])")
_PROC_RANK_NUMBER = re.compile(r"rank=(\d{1,5})")


@dataclass(frozen=True, slots=True)
class LineHeader:
    """What a log line's prefixes say, and where its message (the payload) starts.

    Attributes:
        ident: The syslog identifier (`python3`, `systemd`, `kernel`), when the line has one.
        pid: The pid in the syslog prefix or in vLLM's process prefix (the latter wins).
        stream: A key naming the writer, so interleaved tracebacks of different processes stay apart.
        rank: The parallel rank, e.g. "TP2", "DP0 TP3 EP3", "TP1 EP1".
        level: vLLM's log level (INFO, WARNING, ERROR ...), when the line carries one.
        payload: The message after all prefixes.
    """

    ident: str | None
    pid: int | None
    stream: str
    rank: str | None
    level: str | None
    payload: str


def rank_of_process(proc: str) -> str | None:
    """The rank named by a vLLM process name: `Worker_TP1_EP1` -> "TP1 EP1", `EngineCore_DP0` -> "DP0"."""
    parts = _PROC_RANK.findall(proc)
    if parts:
        return " ".join(parts)
    number = _PROC_RANK_NUMBER.search(proc)
    return f"rank{number.group(1)}" if number else None


def split_header(line: str) -> LineHeader:
    """Split a log line into its prefixes and its payload.

    Args:
        line: One log line, with or without a journal prefix.

    Returns:
        The parsed header; a line without prefixes has its whole text as payload.
    """
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    pos = 0
    ident: str | None = None
    pid: int | None = None
    stream = ""
    rank: str | None = None
    level: str | None = None
    m = _SYSLOG.match(line)
    if m:
        pos = m.end()
        ident = m.group("ident")
        pid = int(m.group("pid")) if m.group("pid") else None
        stream = f"{ident}[{pid}]" if pid is not None else ident
    m = _VLLM_PROC.match(line, pos)
    if m:
        pos = m.end()
        pid = int(m.group("pid"))
        stream = f"({m.group('proc')} pid={pid})"
        rank = rank_of_process(m.group("proc"))
    m = _VLLM_LEVEL.match(line, pos)
    if m:
        pos = m.end()
        level = m.group("level")
    elif m := _SGLANG.match(line, pos):
        pos = m.end()
        rank = m.group("ranks").strip() or rank
    elif m := _TORCH_RANK.match(line, pos):
        pos = m.end()
        rank = rank or f"rank{m.group('rank')}"
        if glog := _GLOG.match(line, pos):
            pos = glog.end()
    return LineHeader(ident, pid, stream, rank, level, line[pos:])


def parse_rank(line: str) -> str | None:
    """The rank a log line's prefix names.

    Args:
        line: One log line, e.g. `[2026-05-26 00:06:20 TP2] ...` or `(Worker_TP1_EP1 pid=1234) ...`.

    Returns:
        "TP2", "DP0 TP3 EP3", "TP1 EP1", "DP0" ..., or None when the prefix names no rank.
    """
    return split_header(line).rank
