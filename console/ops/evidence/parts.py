"""What one incident's evidence holds, part by part: each reader returns the part's text, or raises
Unavailable with the reason there is none (in one line, naming the host).

- units: every unit of the service on every node, as systemd (or the simulated one) reports it;
- journal: the last JOURNAL_LINES lines of every unit of the service, on every node;
- stacks: each engine process's Python stacks (`py-spy dump`, `--native` where it works), on every node;
- ras: NCCL RAS's `VERBOSE STATUS`, asked on the head's own localhost;
- gpus: `nvidia-smi -q -d PERFORMANCE,POWER,CLOCK` on every node;
- metrics: the engine's `/metrics` text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

from console.config import ServiceConfig
from console.domain.values import UnitState
from console.hosts.base import Host, Transport
from console.hosts.endpoints import MetricsUnavailable, metrics_reader
from console.ops.ranks import ras_query

JOURNAL_LINES = 500
#: The most engine processes whose stacks are taken per node (a TP8 engine has 9 or 10).
MAX_PROCESSES = 24
#: One py-spy dump; a process that will not be read in this time is named as such.
DUMP_TIMEOUT_S = 10.0
TOOL_TIMEOUT_S = 15.0
#: NCCL RAS's default port (NCCL_RAS_ADDR), asked of a service on one host.
RAS_DEFAULT_PORT = 28028
GPU_QUERY = ("nvidia-smi", "-q", "-d", "PERFORMANCE,POWER,CLOCK")


class Unavailable(Exception):
    """A part that cannot be had; the message is why, in one line."""


def _tools(node: Host) -> Transport:
    tools = node.tools or node.transport
    if tools is None:
        raise Unavailable(f"{node.name} runs no commands for the console")
    return tools


def _said(text: str) -> str:
    """What a tool said, its lines joined into one (py-spy's EPERM text spans two), 300 characters at most."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())[:300]


#: py-spy's words when ptrace is refused (benfred/py-spy#459, #12, #612; DataDog/system-tests#7625).
_REFUSED = ("permission denied", "operation not permitted", "sys_ptrace", "ptrace")


async def units_text(nodes: Sequence[Host], service: ServiceConfig) -> str:
    out = []
    for node in nodes:
        for unit in service.all_units():
            try:
                st = await node.services.state(unit)
                out.append({"node": node.name, "unit": unit, "active": st.active, "sub": st.sub,
                            "result": st.result, "main_pid": st.main_pid, "since": st.since,
                            "exec_main_status": st.exec_main_status})
            except Exception as exc:
                out.append({"node": node.name, "unit": unit, "error": str(exc) or type(exc).__name__})
    return "".join(json.dumps(row) + "\n" for row in out)


async def journal_text(node: Host, unit: str) -> str:
    lines = []
    async for entry in node.services.journal(unit, follow=False, lines=JOURNAL_LINES):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(entry.ts)) + f".{int(entry.ts % 1 * 1e6):06d}Z"
        lines.append(f"{stamp} {entry.message}")
    return "\n".join(lines[-JOURNAL_LINES:]) + ("\n" if lines else "")


async def metrics_text(host: Host, service: ServiceConfig) -> str:
    reader = metrics_reader(host.probes.get(service.name), service.engine)
    if reader is None:
        raise Unavailable(f"{service.name} on {host.name} has no HTTP probe to read /metrics through")
    try:
        return await reader.text()
    except MetricsUnavailable as exc:
        raise Unavailable(f"/metrics of {service.name} on {host.name}: {exc}") from None


async def gpus_text(node: Host) -> str:
    result = await _tools(node).run(GPU_QUERY, timeout_s=TOOL_TIMEOUT_S)
    if result.exit_status == 127:
        raise Unavailable(f"nvidia-smi not installed on {node.name}")
    if not result.ok:
        raise Unavailable(f"nvidia-smi on {node.name} exited {result.exit_status}: "
                          f"{_said(result.stdout + result.stderr)}")
    return result.stdout


async def ras_text(head: Host, service: ServiceConfig) -> str:
    port = service.cluster.ras_port if service.cluster is not None else RAS_DEFAULT_PORT
    if not port:
        raise Unavailable(f"ras_port = 0 for {service.name}: NCCL RAS is not asked")
    try:
        data = await ras_query(head, port, "VERBOSE STATUS")
    except Exception as exc:
        raise Unavailable(f"no NCCL RAS on {head.name}:{port} ({str(exc) or type(exc).__name__})") from None
    if not data.strip():
        raise Unavailable(f"NCCL RAS on {head.name}:{port} answered nothing")
    return data.decode("utf-8", "replace")


# -- stacks ------------------------------------------------------------------------------------------

def descendants(ps_output: str, roots: Sequence[int]) -> list[tuple[int, str]]:
    """(pid, command line) of `roots` and every process below them, in `ps -e -o pid=,ppid=,args=` output."""
    rows: dict[int, tuple[int, str]] = {}
    for line in ps_output.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            rows[int(parts[0])] = (int(parts[1]), parts[2] if len(parts) > 2 else "")
    wanted, queue = [], [r for r in roots if r in rows]
    seen: set[int] = set()
    while queue:
        pid = queue.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        wanted.append((pid, rows[pid][1]))
        queue += sorted(child for child, (parent, _) in rows.items() if parent == pid)
    return wanted


def _py_spy_argv(service: ServiceConfig, pid: int, native: bool) -> list[str]:
    argv = ["py-spy", "dump", "--pid", str(pid)] + (["--native"] if native else [])
    return ["sudo", "-n", *argv] if service.sudo else argv


async def _dump(tools: Transport, service: ServiceConfig, pid: int) -> tuple[bool, str, bool]:
    """(dumped, text, py-spy missing) for one process: `--native` first, then without it when only that
    failed (it needs the process's native symbols, which a stripped build or another arch may lack)."""
    result = await tools.run(_py_spy_argv(service, pid, True), timeout_s=DUMP_TIMEOUT_S)
    if result.ok:
        return True, result.stdout, False
    said = _said(result.stdout + "\n" + result.stderr)
    if result.exit_status == 127:
        return False, said, True
    if any(word in said.lower() for word in _REFUSED):
        return False, said, False  # no point asking again without --native
    plain = await tools.run(_py_spy_argv(service, pid, False), timeout_s=DUMP_TIMEOUT_S)
    if plain.ok:
        return True, f"(--native failed: {said})\n{plain.stdout}", False
    return False, _said(plain.stdout + "\n" + plain.stderr) or said, False


async def stacks_text(node: Host, service: ServiceConfig, states: Sequence[UnitState]) -> str:
    roots = [s.main_pid for s in states if s.is_running and s.main_pid]
    if not roots:
        raise Unavailable(f"no engine process runs on {node.name} (" +
                          ", ".join(f"{s.unit} {s.active}" for s in states if s.since) + ")")
    tools = _tools(node)
    ps = await tools.run(["ps", "-e", "-o", "pid=,ppid=,args="], timeout_s=TOOL_TIMEOUT_S)
    processes = descendants(ps.stdout, roots) if ps.ok else [(pid, "") for pid in roots]
    processes = processes[:MAX_PROCESSES] or [(pid, "") for pid in roots]
    dumps = await asyncio.gather(*(_dump(tools, service, pid) for pid, _ in processes))
    if not any(ok for ok, _, _ in dumps):
        _, said, missing = dumps[0]
        if missing:
            raise Unavailable(f"py-spy not installed on {node.name}")
        raise Unavailable(f"py-spy on {node.name} could not read pid {processes[0][0]}: {said}")
    out = []
    for (pid, args), (ok, text, _) in zip(processes, dumps, strict=True):
        out.append(f"=== pid {pid}: {args[:300]}")
        out.append(text.rstrip("\n") if ok else f"(no stack: {text})")
        out.append("")
    return "\n".join(out) + "\n"
