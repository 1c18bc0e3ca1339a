"""Before a layout starts over several hosts: what would only show as a rendezvous that never ends.

Checked on every node the layout uses, before anything is stopped: the node answers; its unit runs the
same program on the same model as the head's (`systemctl show -p ExecStart`: a different engine build or
model path on one node fails late and strangely); and, where the service names its interface (`nic`),
that the interface exists on the node (`ip -o addr show dev NIC`) and is the one the node reaches the head
by (`ip -o route get HEAD`), since NCCL and Gloo bind where NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME say.
A simulated host has no commands to run: only its answer is checked.
"""

from __future__ import annotations

import asyncio
import re

from console.config import LayoutConfig, ServiceConfig
from console.hosts.base import Host
from console.ops.cluster import head_address, node_hosts

_ARGV = re.compile(r"argv\[\]=([^;]*)")
#: Flags whose value is the model: SGLang's --model-path, vLLM's --model (or `serve MODEL`).
_MODEL_FLAGS = ("--model-path", "--model")
_QUICK_S = 10.0


async def node_problems(host: Host, service: ServiceConfig, layout: LayoutConfig) -> list[str]:
    """What stops `layout` from starting on its nodes, one line each (empty: nothing found)."""
    nodes = node_hosts(host, service)[: layout.nodes]
    unit = service.unit_for(layout)
    head = head_address(service, nodes[0].config)
    found = await asyncio.gather(*(_node(node, rank, unit, head, service.cluster.nic) for rank, node in
                                   enumerate(nodes)))  # fmt: skip
    problems = [p for _, node_problems_ in found for p in node_problems_]
    programs = {node.name: program for node, (program, _) in zip(nodes, found, strict=True) if program}
    if len(set(programs.values())) > 1:
        head_program = programs.get(nodes[0].name)
        for name, program in programs.items():
            if program != head_program and head_program is not None:
                problems.append(f"{name}: {unit} runs {_said(program)}, the head {nodes[0].name} "
                                f"{_said(head_program)}: every node must run the same engine on the same model")
    return problems


async def _node(node: Host, rank: int, unit: str, head: str, nic: str | None) -> tuple[tuple | None, list[str]]:
    """(the unit's program and model, or None where it cannot be read; this node's problems)."""
    try:
        async with asyncio.timeout(_QUICK_S):
            await node.services.state(unit)
    except Exception as exc:
        return None, [f"{node.name} (node-rank {rank}) does not answer: {exc}"]
    transport = node.transport
    if transport is None:
        return None, []
    problems = []
    shown = await transport.run(["systemctl", "show", "-p", "ExecStart", unit], timeout_s=_QUICK_S)
    program = exec_program(shown.stdout) if shown.ok else None
    if nic:
        addr = await transport.run(["ip", "-o", "addr", "show", "dev", nic], timeout_s=_QUICK_S)
        if not addr.ok or not addr.stdout.strip():
            problems.append(f"{node.name}: nic = {nic!r} is no interface there (ip -o addr show dev {nic}); NCCL "
                            "and Gloo would fail to bind")  # fmt: skip
        elif rank > 0:
            route = await transport.run(["ip", "-o", "route", "get", head], timeout_s=_QUICK_S)
            dev = re.search(r"\bdev\s+(\S+)", route.stdout) if route.ok else None
            if dev is None:
                problems.append(f"{node.name}: no route to the head's {head} (ip -o route get {head})")
            elif dev[1] != nic:
                problems.append(f"{node.name} reaches the head's {head} by {dev[1]}, not by nic = {nic!r}: the "
                                "rendezvous and NCCL would use different interfaces")  # fmt: skip
    return program, problems


def exec_program(show: str) -> tuple[str, str | None] | None:
    """(the program, the model) of `systemctl show -p ExecStart` output, or None when it names none."""
    match = _ARGV.search(show)
    if match is None:
        return None
    words = match[1].split()
    if not words:
        return None
    model = None
    for flag in _MODEL_FLAGS:
        if flag in words[:-1]:
            model = words[words.index(flag) + 1]
    if model is None and "serve" in words[:-1]:  # vllm serve MODEL
        model = words[words.index("serve") + 1]
    module = words[words.index("-m") + 1] if "-m" in words[:-1] else None
    return (words[0] + (f" -m {module}" if module else ""), model)


def _said(program: tuple[str, str | None]) -> str:
    return f"{program[0]} on {program[1] or 'no model named'}"
