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
    r" (?P<host>[^\s:]+) (?P<ident>[^\s\[\]]{1,64}?)(?:\[(?P<pid>\d+)\])?: "
)
# (A host name holds no colon: `<time> torch._dynamo.exc.XError: RuntimeError: ...` is a timestamped
# chained exception, not a syslog line.)
# journald's identifier alone (`journalctl -o cat` pasted with it, or a trimmed paste): "python[1234]: ".
#: `serve-console tail`'s own prefix: the entry's local time to the millisecond, and its unit.
_TAIL = re.compile(r"\d\d:\d\d:\d\d\.\d{3} (?P<unit>[\w@.:\\-]{1,256}\.(?:service|scope)): ")
_IDENT = re.compile(r"(?P<ident>[A-Za-z_][\w.-]{0,63})\[(?P<pid>\d{1,9})\]: ")
# docker compose: "vllm-1  | " (the service name, padded, and a bar).
_COMPOSE = re.compile(r"(?P<svc>[A-Za-z0-9][\w.-]{0,63}) +\| ")
# A bare timestamp (docker logs -t, loguru, Python logging, k8s): ISO date and time, maybe bracketed,
# maybe followed by loguru's "| LEVEL | module:function:line - ".
_TIMESTAMP = re.compile(
    r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?(?: ?[|,-])?[ \t]"
    r"(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|SUCCESS|TRACE) *\| [^|\n]{0,120}? - )?"
)
# A level word first: uvicorn's "ERROR:    ", Python's "WARNING:root:", "INFO 2024-05-01 ..." .
_LEVEL_WORD = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::(?:[\w.]{1,64}:)?(?: +|$)| +(?=\d{4}-))"
)
# vLLM prefixes every line a child process writes: "(Worker_TP1_EP1 pid=1301) ", Ray adds ", ip=...".
_VLLM_PROC = re.compile(r"\((?P<proc>[A-Za-z][^()\n]{0,60}? )?pid=(?P<pid>\d+)(?:, ip=[\w.:-]{1,64})?\) ?")
# vLLM's logger: "ERROR 05-26 00:06:20 [core.py:708] " (older: "ERROR 05-26 00:06:20 core.py:708] ").
_VLLM_LEVEL = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]\n]{1,80}\]|[\w.]{1,80}:\d+\]) ?"
)
# SGLang's logger: "[2026-05-26 00:06:20 DP0 TP3 EP3] " (no rank part in the launcher process).
_SGLANG = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<ranks>(?: [A-Z][A-Z_]{0,8}\d{1,5}){0,6})\] ?"
)
# PyTorch's per-rank prefix: "[rank2]:[E526 00:16:20.123456789 ProcessGroupNCCL.cpp:632] " or
# torchrun's "[rank0]: " before every line of a rank's output (one space, then the message as written).
_TORCH_RANK = re.compile(r"\[rank(?P<rank>\d{1,5})\]: ?")
_GLOG = re.compile(r"\[?(?P<sev>[IWEF])(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)? +(?:\d+ )?)? ?[\w.]{1,80}:\d+\] ?")
# What a paste adds before a line: a log exporter's epoch column (`1779264164565<TAB>` before its ISO
# time), a markdown quote `> `, a CI gutter `  | `, a markdown bullet
# before a timestamp (`- 2024-06-22T...`), the tail of a cut vLLM prefix (`[core.py:515] `), a stray
# inline-code backtick, colour codes that lost their escape byte (`[36m`), HTML colour tags (`<font ...><b>`).
_ARTEFACT = re.compile(r" {0,4}(?:\d{10,19}\t(?=\d{4}-)|> ?|\| |- (?=\d)|`|\[[\w.-]{1,80}\.py:\d{1,6}\]|\[\d{1,3}(?:;\d{1,3}){0,4}m|(?:</?[A-Za-z][^<>\n]{0,80}>)+) ?")
# Colour codes, as vLLM writes them when its output is a terminal.
_ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
_PROC_RANK = re.compile(r"(?<![A-Za-z0-9])((?:DP|PP|TP|EP|DCP|PCP)\d{1,5})(?![A-Za-z0-9])")
_PROC_RANK_NUMBER = re.compile(r"rank=(\d{1,5})")
_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}
#: Prefixes stack (compose, journald, vLLM's process, its level ...); more than this is no prefix.
_MAX_PREFIXES = 8


@dataclass(frozen=True, slots=True)
class LineHeader:
    """What a log line's prefixes say, and where its message (the payload) starts.

    Attributes:
        ident: The syslog identifier (`python3`, `systemd`, `kernel`), when the line has one.
        pid: The pid in the syslog prefix or in vLLM's process prefix (the latter wins).
        stream: A key naming the writer, so interleaved tracebacks of different processes stay apart.
        rank: The parallel rank, e.g. "TP2", "DP0 TP3 EP3", "TP1 EP1", "rank0".
        level: The log level (INFO, WARNING, ERROR ...), when a prefix carries one.
        payload: The message after all prefixes.
        tagged: Whether any prefix was found (an untagged line may continue a wrapped one).
        engine: Whether an engine's own prefix was found (SGLang's, vLLM's, PyTorch's rank, glog's):
            the line is the engine's output, never systemd's.
    """

    ident: str | None
    pid: int | None
    stream: str
    rank: str | None
    level: str | None
    payload: str
    tagged: bool = False
    engine: bool = False


def rank_of_process(proc: str) -> str | None:
    """The rank named by a vLLM process name: `Worker_TP1_EP1` -> "TP1 EP1", `EngineCore_DP0` -> "DP0"."""
    parts = _PROC_RANK.findall(proc)
    if parts:
        return " ".join(parts)
    number = _PROC_RANK_NUMBER.search(proc)
    return f"rank{number.group(1)}" if number else None


def split_header(line: str, *, deep: bool = False) -> LineHeader:
    """Split a log line into its prefixes and its payload.

    Args:
        line: One log line, with or without a journal prefix.
        deep: Also strip the prefixes other writers add (docker compose's `name | `, journald's bare
            `python[1234]: `, ISO timestamps, loguru's and uvicorn's levels). Triage reads deep; the
            phase tracker, whose milestones know the engines' own prefixes, reads shallow.

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
    engine = False
    m = _SYSLOG.match(line)
    if m:
        pos = m.end()
        ident = m.group("ident")
        pid = int(m.group("pid")) if m.group("pid") else None
        stream = f"{ident}[{pid}]" if pid is not None else ident
    elif line[2:3] == ":" and (m := _TAIL.match(line)):  # tail's line keeps no writer: its shape decides, as -o cat
        pos = m.end()
    for _ in range(_MAX_PREFIXES):
        if m := _VLLM_PROC.match(line, pos):
            pid = int(m.group("pid"))
            proc = (m.group("proc") or "").strip()
            stream += f"({proc} pid={pid})"
            rank = rank_of_process(proc) or rank
            engine = True
        elif m := _VLLM_LEVEL.match(line, pos):
            level = m.group("level")
            engine = True
        elif m := _SGLANG.match(line, pos):
            rank = m.group("ranks").strip() or rank
            engine = True
        elif m := _TORCH_RANK.match(line, pos):
            rank = rank or f"rank{m.group('rank')}"
            stream += f"[rank{m.group('rank')}]"
            engine = True
        elif m := _GLOG.match(line, pos):
            level = _GLOG_LEVEL[m.group("sev")]
            engine = True
        elif not deep:
            break
        elif m := _ARTEFACT.match(line, pos):
            pass
        elif m := _TIMESTAMP.match(line, pos):
            level = m.group("level") or level
        elif m := _LEVEL_WORD.match(line, pos):
            level = m.group("level")
        elif m := _IDENT.match(line, pos):
            ident, pid = m.group("ident"), int(m.group("pid"))
            stream += f"{ident}[{pid}]"
        elif m := _COMPOSE.match(line, pos):
            stream += f"{m.group('svc')}|"
        else:
            break
        if m.end() == pos:
            break
        pos = m.end()
    return LineHeader(ident, pid, stream, rank, level, line[pos:], pos > 0, engine)


def parse_rank(line: str) -> str | None:
    """The rank a log line's prefix names.

    Args:
        line: One log line, e.g. `[2026-05-26 00:06:20 TP2] ...` or `(Worker_TP1_EP1 pid=1234) ...`.

    Returns:
        "TP2", "DP0 TP3 EP3", "TP1 EP1", "DP0" ..., or None when the prefix names no rank.
    """
    return split_header(line).rank
