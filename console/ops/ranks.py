"""Per-rank health of a service over several hosts: each node judged on its own, apart from the head's
`/health`, which keeps answering 200 while a worker is dead or wedged (sglang#3099, vllm#16259).

Each node of the running layout is read for: its unit's state (a unit that ended is a dead node, its
cause triaged from that node's own journal), its main process's state (`T`: stopped, a wedge), and what
NCCL RAS says of the node's processes (missing: down or silent 5 s; dead: unreachable 60 s), asked once
through the head. The group is as healthy as its worst node.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.config import LayoutConfig, ServiceConfig
from console.domain.layout import gpus_used
from console.domain.ras import MAX_REPORT_BYTES, RasReport, parse_ras_status
from console.domain.safe_text import printable
from console.domain.values import Finding
from console.hosts.base import Host
from console.ops.cluster import head_address, node_hosts
from console.ops.death import last_death

ALIVE, UNRESPONSIVE, DEAD, UNKNOWN = "alive", "unresponsive", "dead", "unknown"
_WORST = (ALIVE, UNKNOWN, UNRESPONSIVE, DEAD)
RAS_TIMEOUT_S = 3.0
#: A node's address as RAS names it (the source it reaches the head from) does not change while it runs.
_sources: dict[tuple[str, str], str | None] = {}


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """One node of a running layout: its ranks and how they are."""

    node_rank: int
    host: str
    unit: str
    ranks: range
    state: str
    """alive, unresponsive (wedged or silent), dead, or unknown (the node could not be read)."""
    detail: str
    cause: Finding | None = None
    """What killed it, from its own journal, when its unit ended."""

    def ranks_text(self) -> str:
        return f"{self.ranks.start}-{self.ranks.stop - 1}" if len(self.ranks) > 1 else str(self.ranks.start)

    def words(self) -> str:
        cause = f": {self.cause.cls.value}: {self.cause.summary}" if self.cause is not None else ""
        return f"node-rank {self.node_rank} ({self.host}) ranks {self.ranks_text()}: {self.state}, {self.detail}{cause}"

    def to_json(self) -> dict[str, Any]:
        return {
            "node_rank": self.node_rank,
            "host": self.host,
            "unit": self.unit,
            "ranks": [self.ranks.start, self.ranks.stop - 1],
            "state": self.state,
            "detail": self.detail,
            "cause": None if self.cause is None else self.cause.to_json(),
        }


@dataclass(frozen=True, slots=True)
class NodeUnit:
    """A unit of the service that runs on a node other than the head while the head runs none of its
    units: the head died, or a failed start left it; it holds its GPUs and serves nothing."""

    node_rank: int
    host: str
    unit: str
    main_pid: int | None

    def words(self, head: str, service: str) -> str:
        return (f"{self.host} (node-rank {self.node_rank}) runs {self.unit}, main pid {self.main_pid or '-'}, while "
                f"the head {head} runs none of {service}'s units: it holds its GPUs and serves nothing "
                f"(serve-console stop --host {head} stops it)")

    def to_json(self) -> dict[str, Any]:
        return {"node_rank": self.node_rank, "host": self.host, "unit": self.unit, "main_pid": self.main_pid}


async def orphan_units(head: Host, service: ServiceConfig) -> list[NodeUnit]:
    """Every unit of `service` that runs on a node other than the head (the caller knows the head runs
    none); a node that cannot be read is skipped (its own `status` says so)."""
    out: list[NodeUnit] = []
    for rank, node in list(enumerate(node_hosts(head, service)))[1:]:
        try:
            states = await asyncio.gather(*(node.services.state(u) for u in service.all_units()))
        except Exception:
            continue
        out += [NodeUnit(rank, node.name, s.unit, s.main_pid) for s in states if s.is_running]
    return out


def group_state(nodes: Sequence[NodeHealth]) -> str:
    """The worst node's state (alive when there are none)."""
    return max((n.state for n in nodes), key=_WORST.index, default=ALIVE)


async def node_health(head: Host, service: ServiceConfig, layout: LayoutConfig, unit: str) -> list[NodeHealth]:
    """Every node of `layout` (running as `unit` on each), judged on its own; `head` is the service's
    head or one of its nodes (opened with the others as its peers)."""
    hosts = node_hosts(head, service)[: layout.nodes]
    head = hosts[0]  # the service's head, also when a node's own screen asks (RAS answers on the head)
    per_node = gpus_used(layout.layout, service.engine) // max(layout.nodes, 1)
    main_pid = None
    with contextlib.suppress(Exception):  # the head's own line says why it cannot be read
        main_pid = (await head.services.state(unit)).main_pid
    report, ras_note = await ras_status(head, service, unit, main_pid)
    address = head_address(service, head.config)
    return list(await asyncio.gather(*(
        _one(node, service, unit, rank, range(rank * per_node, (rank + 1) * per_node), report, ras_note, address)
        for rank, node in enumerate(hosts)
    )))  # fmt: skip


async def _one(node: Host, service: ServiceConfig, unit: str, rank: int, ranks: range, report: RasReport | None,
               ras_note: str, head: str) -> NodeHealth:  # fmt: skip
    def health(state: str, detail: str, cause: Finding | None = None) -> NodeHealth:
        return NodeHealth(rank, node.name, unit, ranks, state, detail, cause)

    try:
        state = await node.services.state(unit)
        if not state.is_running:
            death = await last_death(node, service, [state])
            return health(DEAD, f"{unit} {state.active} (result {state.result or '-'})",
                          death.finding if death else None)  # fmt: skip
        process = await node.node.process_state(state.main_pid) if node.node and state.main_pid else "?"
        if process in ("T", "t"):
            return health(UNRESPONSIVE, f"main process {state.main_pid} is stopped (state {process}): wedged, "
                          "as under SIGSTOP or a debugger")  # fmt: skip
        if process is None or process in ("Z", "X"):
            return health(DEAD, f"main process {state.main_pid} is gone")
        source = await _source(node, head)
    except Exception as exc:  # one node that cannot be read is unknown, never a crash of the status
        return health(UNKNOWN, f"cannot read {node.name}: {exc}")
    if report is not None and source is not None:
        if report.dead.get(source):
            return health(DEAD, f"NCCL RAS: {report.dead[source]} processes on {source} considered dead")
        if report.missing.get(source):
            return health(UNRESPONSIVE, f"NCCL RAS: no data from {report.missing[source]} processes on {source} "
                          "(down, or silent 5 s)")  # fmt: skip
    return health(ALIVE, f"{unit} running, main process {state.main_pid}" + (f"; {ras_note}" if ras_note else ""))


async def _source(node: Host, head: str) -> str | None:
    key = (node.name, head)
    if key not in _sources and node.node is not None:
        _sources[key] = await node.node.route_source(head)
    return _sources.get(key)


#: How far up from a RAS listener its parents are followed to find the unit's main process.
_MAX_TREE_DEPTH = 32


async def ras_holder(head: Host, port: int, unit: str, main_pid: int | None) -> str | None:
    """None when what listens on the head's RAS port is the unit's own (its main process or one under it)
    or nothing listens; else who holds it, in words: any local user can bind the port between two starts
    (NCCL then runs without RAS, saying so only at INFO), and its answer is no node's health."""
    assert head.node is not None
    try:
        found = await head.node.listener(RAS_ADDRESS, port)
    except Exception as exc:  # the owner cannot be checked: the answer cannot be trusted
        return f"a listener the console cannot check ({str(exc) or type(exc).__name__})"
    if found is None:
        return None
    who = f"pid {found.pid} ({printable(found.command[:80])})"
    if found.pid is not None and main_pid:
        key = (head.name, port, found.pid, main_pid)
        if key not in _trees:  # a listener's ancestry does not change while both processes live
            _trees[key] = await _under(head, found.pid, main_pid)
        return None if _trees[key] else f"{who}, which is not a process of {unit}"
    if found.pid is None and main_pid and found.uid is not None:  # ss names only this user's processes
        if found.uid == await head.node.process_uid(main_pid):
            return None  # the unit's own user: as far as this host lets the console see, the engine's
        return f"a process of uid {found.uid}, not {unit}'s user"
    if found.pid is not None:
        return f"{who} while {unit} runs no process"
    return "a process the host does not name to the console's user"


#: (head, port, listener pid, main pid) -> whether the listener is under the main process.
_trees: dict[tuple[str, int, int, int], bool] = {}


async def _under(head: Host, pid: int | None, main_pid: int) -> bool:
    """`pid` is `main_pid` or one of its descendants (its parents followed up, a bounded way)."""
    assert head.node is not None
    for _ in range(_MAX_TREE_DEPTH):
        if pid == main_pid:
            return True
        if not pid or pid <= 1:
            return False
        pid = await head.node.parent_pid(pid)
    return False


#: Where RAS is asked: the head's own loopback.
RAS_ADDRESS = "127.0.0.1"


async def ras_status(head: Host, service: ServiceConfig, unit: str = "", main_pid: int | None = None
                     ) -> tuple[RasReport | None, str]:  # fmt: skip
    """NCCL RAS's report, asked on the head's own localhost (`ras_port`) of the listener that belongs to
    the head's unit (its main process `main_pid` or one under it), and a note when there is none."""
    port = service.cluster.ras_port if service.cluster is not None else 0
    if not port or head.node is None:
        return None, ""
    holder = await ras_holder(head, port, unit, main_pid)
    if holder is not None:
        return None, f"NCCL RAS port {port} on {head.name} is held by {holder}: judged without RAS"
    try:
        data = await ras_query(head, port, "STATUS")
        return parse_ras_status(data.decode("utf-8", "replace")), ""
    except Exception as exc:  # no RAS (NCCL < 2.24, NCCL_RAS_ENABLE=0), a timeout, no report: say so
        return None, f"no NCCL RAS on {head.name}:{port} ({str(exc) or type(exc).__name__})"


async def ras_query(head: Host, port: int, command: str, *, timeout_s: float = RAS_TIMEOUT_S) -> bytes:
    """NCCL RAS's raw answer to `command` (`STATUS`, `VERBOSE STATUS`), asked on the head's own localhost,
    MAX_REPORT_BYTES at most (a byte more, so a caller can tell it was cut).

    Raises:
        HostError, OSError, TimeoutError: RAS does not answer (NCCL < 2.24, NCCL_RAS_ENABLE=0), in time.
        ValueError: the host cannot dial (no node facts).
    """
    if head.node is None:
        raise ValueError(f"{head.name} cannot open a connection of its own")
    writer = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await head.node.dial(RAS_ADDRESS, port)
            writer.write(b"CLIENT PROTOCOL 2\n")
            await reader.readline()  # SERVER PROTOCOL 2
            writer.write(command.encode() + b"\n")
            await writer.drain()
            data = b""
            # The report comes in several writes: read to its end, or past the bound, then decode once.
            while len(data) <= MAX_REPORT_BYTES and (chunk := await reader.read(MAX_REPORT_BYTES)):
                data += chunk
        return data
    finally:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
