"""One node of a service over several hosts: its seat, the rendezvous, NCCL RAS and the stall watch.

Each engine builds a `ClusterNode` from its arguments and its ranks; a service on one host gets one too,
whose rendezvous, collectives and watch return at once (and which starts no RAS socket).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Sequence

from console.sim.cluster.link import ClusterLink, RendezvousPortTaken, RendezvousTimeout
from console.sim.cluster.liveness import Liveness
from console.sim.cluster.ras import RasServer
from console.sim.cluster.ras_report import RasComm, RasProcess
from console.sim.cluster.roster import NodeSeat, RankSeat
from console.sim.cluster.topology import NodePlace, concrete_ip, node_ip, split_host_port
from console.sim.cluster.torch_text import (
    DEFAULT_PG_TIMEOUT_S,
    connect_timeout,
    port_taken,
    store_timeout,
    unique_id_timeout,
)
from console.sim.engine_args import EngineArgs
from console.sim.logfmt import Rank

#: Failure injections this package acts on (each engine adds them to its own --fail choices).
FAIL_RENDEZVOUS, FAIL_OOM_KILL = "rendezvous", "oom_kill"


def job_comms(world: Sequence[Rank], tag: str) -> list[RasComm]:
    """The job's NCCL communicators: the world, and each pipeline stage's tensor-parallel group."""

    def comm(name: str, ranks: Sequence[Rank]) -> RasComm:
        digest = hashlib.sha1(f"{tag}|{name}".encode()).hexdigest()
        return RasComm(int(digest[:16], 16), tuple(r.index for r in ranks))

    comms = [comm("world", world)]
    stages = sorted({(r.dp_rank, r.pp_rank) for r in world}, key=lambda k: (k[0] or 0, k[1]))
    if len(stages) > 1:
        for dp_rank, pp_rank in stages:
            comms.append(comm(f"tp|{dp_rank}|{pp_rank}",
                              [r for r in world if (r.dp_rank, r.pp_rank) == (dp_rank, pp_rank)]))
    return comms


class ClusterNode:
    """This process's node: who it is, the link to the others, what RAS reports, when work has stalled.

    Args:
        args: the engine's arguments (nnodes, node rank, rendezvous address, timeouts, --fail).
        world: every rank of the service, on every node.
        local: this node's ranks, on its own GPUs.
        pids: each local rank's process id.
        physical: each local rank's card as nvidia-smi numbers it.
    """

    def __init__(self, args: EngineArgs, world: Sequence[Rank], local: Sequence[Rank], pids: Sequence[int],
                 physical: Sequence[int]) -> None:
        self.args = args
        host, port = split_host_port(args.dist_init_addr) if args.dist_init_addr else ("127.0.0.1", 0)
        self.place = NodePlace(args.nnodes, args.node_rank, host, port)
        self.liveness = Liveness.for_run(args.time_scale)
        seats = tuple(RankSeat(r.index, pid, r.gpu, gpu) for r, pid, gpu in zip(local, pids, physical, strict=True))
        # Node 0 is where the others dial; another node's address is its own, or its connection's.
        head_ip = concrete_ip(host) or "127.0.0.1"
        ip = node_ip(args.host) or (head_ip if self.place.is_head else "")
        self.link = ClusterLink(self.place, NodeSeat(args.node_rank, ip, os.getpid(), seats), len(world),
                                self.liveness, reachable=args.fail != FAIL_RENDEZVOUS)
        self.comms = job_comms(world, f"{args.dist_init_addr}|{args.layout.name}")
        self.ras = RasServer(self.processes, self.comms)

    @property
    def spans_hosts(self) -> bool:
        return self.place.spans_hosts

    @property
    def timeout_s(self) -> float:
        """The process group's timeout in story seconds (the rendezvous and NCCL's collectives)."""
        return float(self.args.dist_timeout_s or DEFAULT_PG_TIMEOUT_S)

    async def join(self) -> None:
        """The rendezvous, then NCCL's RAS socket (NCCL starts RAS as it initialises).

        Raises:
            RendezvousTimeout: not every node joined within the process group's timeout.
            RendezvousPortTaken: node 0 could not listen on the rendezvous port.
        """
        await self.link.join(self.timeout_s * self.args.time_scale)
        if self.spans_hosts:
            await self.ras.start()

    def rendezvous_error(self, exc: RendezvousTimeout | RendezvousPortTaken) -> str:
        """PyTorch's error on this node's first rank once the rendezvous failed."""
        if isinstance(exc, RendezvousPortTaken):
            return port_taken(self.place.head_port)
        if self.place.is_head:  # global rank 0 hosts the store
            return store_timeout(self.timeout_s, exc.joined_ranks, exc.world_ranks)
        if not exc.reached_head:
            return connect_timeout(self.timeout_s, self.place.head_host, self.place.head_port)
        return unique_id_timeout(self.link.seat.ranks[0].rank if self.link.seat.ranks else 0)

    async def allreduce_min(self, key: str, value: float) -> float:
        return await self.link.allreduce_min(key, value)

    async def barrier(self, key: str) -> None:
        await self.link.barrier(key)

    def processes(self) -> list[RasProcess]:
        """Every rank's process and its liveness as this node sees it, for RAS."""
        now, out = time.monotonic(), []
        for seat, peer in self.link.views():
            for rank in seat.ranks:
                state = peer.rank_state(rank.rank, self.liveness, now)
                out.append(RasProcess(rank.rank, rank.pid, seat.ip, rank.cuda_dev, rank.nvml_dev, state))
        return out

    async def watch_stall(self, busy: Callable[[], bool], timeout_s: float) -> float:
        """Return once a running batch has made no progress for `timeout_s` story seconds.

        As SGLang's watchdog and vLLM's RPC timeout judge it: the clock runs while work is pending, from the
        last completed step or from when the work began, whichever is later. On one host steps never wait.
        Returns the stall's length in story seconds.
        """
        if not self.spans_hosts:
            await asyncio.Event().wait()
        limit = timeout_s * self.args.time_scale
        poll = min(0.05, max(limit / 20, 0.005))
        since: float | None = None
        while True:
            await asyncio.sleep(poll)
            now = time.monotonic()
            if not busy():
                since = None
                continue
            since = now if since is None else since
            stalled = now - max(since, self.link.steps.last_done)
            if stalled >= limit:
                return stalled / self.args.time_scale

    async def close(self) -> None:
        await self.ras.stop()
        await self.link.close()
