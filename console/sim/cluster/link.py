"""The TCP rendezvous between the nodes of a service, and the connection each node keeps to node 0.

Node 0 listens on the rendezvous port (SGLang's `--dist-init-addr`, vLLM's `--master-port`), as
torch's TCPStore master does; every other node dials it, retrying until the timeout, and announces its
seat. Once every node has joined, node 0 sends the roster back: that is the end of the rendezvous (init
distributed). The connections stay open: collectives (`allreduce_min`, a barrier) go through node 0, and
every node sends a keep-alive, node 0 relaying what it hears of everyone, which is what the NCCL RAS
emulation reports; each forward step is a round trip from node 0 to every node (`step`). A node that
never joins leaves the others waiting with no error until the timeout; a node lost (killed, or stopped)
after the rendezvous leaves every later collective and step waiting, as a real one does, until it answers
again. Messages are JSON lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import time
from collections.abc import Callable
from typing import Any

from console.sim.cluster.liveness import Liveness, PeerState, aged_back, apply_table, beat_table
from console.sim.cluster.roster import NodeSeat
from console.sim.cluster.steps import StepRounds
from console.sim.cluster.topology import NodePlace

CONNECT_RETRY_S = 0.1
#: A peer stopped with SIGSTOP reads nothing; past this much unsent data node 0 stops writing to it.
MAX_UNSENT_BYTES = 1 << 20


class RendezvousTimeout(Exception):
    """The rendezvous did not complete in time.

    Args:
        joined_ranks: ranks that reached node 0's store (node 0's own included).
        world_ranks: ranks the world has.
        reached_head: whether this node ever connected to node 0.
    """

    def __init__(self, joined_ranks: int, world_ranks: int, reached_head: bool) -> None:
        super().__init__(f"{joined_ranks}/{world_ranks} ranks joined")
        self.joined_ranks, self.world_ranks, self.reached_head = joined_ranks, world_ranks, reached_head


class RendezvousPortTaken(Exception):
    """Node 0 could not listen on the rendezvous port."""


class ClusterLink:
    """This node's part in the rendezvous and, after it, its connection to the other nodes.

    Args:
        place: which node this is and where node 0 listens.
        seat: this node's seat (its address may be empty: the connection's local address is used).
        world_ranks: the number of ranks over all nodes.
        liveness: the keep-alive clock.
        reachable: False for a node that cannot reach the rendezvous (`--fail rendezvous`).
    """

    def __init__(self, place: NodePlace, seat: NodeSeat, world_ranks: int, liveness: Liveness, *,
                 reachable: bool = True) -> None:
        self.place, self.seat, self.world_ranks, self.liveness = place, seat, world_ranks, liveness
        self.reachable = reachable
        self.roster: dict[int, NodeSeat] = {}
        self.peers: dict[int, PeerState] = {}
        self.on_relay: Callable[[str], None] | None = None
        """Called on a non-head node with each line node 0 relays (SGLang's batch lines)."""
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._server: asyncio.AbstractServer | None = None
        self._joined = asyncio.Event()
        self._parts: dict[str, dict[int, float]] = {}
        self._results: dict[str, asyncio.Future[float]] = {}
        self._own_dead: dict[int, float] = {}
        self._tasks: set[asyncio.Task] = set()
        self._late: list[asyncio.StreamWriter] = []
        self.steps = StepRounds()

    # -- the rendezvous --------------------------------------------------------------------------
    async def join(self, timeout_s: float) -> None:
        """Wait until every node has joined (real seconds).

        Raises:
            RendezvousTimeout: not everyone joined in time.
            RendezvousPortTaken: node 0's port is held by another program.
        """
        deadline = time.monotonic() + timeout_s
        if not self.place.spans_hosts:
            self.roster[0] = self.seat
            return
        if self.place.is_head:
            await self._serve_rendezvous(deadline)
        else:
            await self._dial_rendezvous(deadline)
        self._spawn(self._keep_alive())

    async def _serve_rendezvous(self, deadline: float) -> None:
        self.roster[0] = self.seat
        if self.reachable:
            try:
                self._server = await asyncio.start_server(self._accept, host=None, port=self.place.head_port,
                                                          reuse_address=True)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise RendezvousPortTaken(self.place.head_port) from None
                raise
        try:
            await asyncio.wait_for(self._joined.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            joined = sum(len(seat.ranks) for seat in self.roster.values())
            raise RendezvousTimeout(joined, self.world_ranks, True) from None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            doc = json.loads(await reader.readline() or b"{}")
            seat = NodeSeat.from_json(doc["seat"])
        except (ValueError, KeyError, TypeError, OSError):
            writer.close()
            return
        node = seat.node_rank
        if self._joined.is_set() or node in self.roster or not 0 < node < self.place.nnodes:
            self._late.append(writer)  # a late or duplicate joiner waits for a rendezvous that is over
            return
        if not seat.ip:
            seat = seat.with_ip(writer.get_extra_info("peername")[0])
        self.roster[node], self.peers[node], self._writers[node] = seat, PeerState(), writer
        if len(self.roster) == self.place.nnodes:
            world = {"op": "world", "nodes": [s.to_json() for s in self.roster.values()]}
            for peer in self._writers.values():
                self._send(peer, world)
            self._joined.set()
        try:
            await self._read(node, reader)
        except asyncio.CancelledError:
            pass  # the process is ending: asyncio would log a cancelled connection handler as an error

    async def _dial_rendezvous(self, deadline: float) -> None:
        reached = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.reachable:
                await asyncio.sleep(max(0.0, left))
                raise RendezvousTimeout(0, self.world_ranks, reached)
            try:
                reader, writer = await asyncio.wait_for(self._open(), left)
                break
            except (OSError, TimeoutError):
                await asyncio.sleep(min(CONNECT_RETRY_S, max(0.0, deadline - time.monotonic())))
        reached = True
        seat = self.seat if self.seat.ip else self.seat.with_ip(writer.get_extra_info("sockname")[0])
        self.seat, self._writers[0], self.peers[0] = seat, writer, PeerState()
        self._send(writer, {"op": "join", "seat": seat.to_json()})
        self._spawn(self._read(0, reader))
        try:
            await asyncio.wait_for(self._joined.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise RendezvousTimeout(0, self.world_ranks, reached) from None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = self.place.head_host, self.place.head_port
        if self.seat.ip:
            try:  # leave from this node's own address, so node 0 (and RAS) tells the hosts apart
                return await asyncio.open_connection(host, port, local_addr=(self.seat.ip, 0))
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
        return await asyncio.open_connection(host, port)

    # -- after the rendezvous --------------------------------------------------------------------
    async def allreduce_min(self, key: str, value: float) -> float:
        """The smallest `value` over all nodes; waits for ever for a node that never contributes."""
        if not self.place.spans_hosts:
            return value
        result = self._results.setdefault(key, asyncio.get_running_loop().create_future())
        if self.place.is_head:
            self._contribute(key, 0, value)
        else:
            self._send(self._writers[0], {"op": "reduce", "key": key, "value": value})
        return await result

    async def barrier(self, key: str) -> None:
        """Wait until every node has reached this point."""
        await self.allreduce_min(key, 0.0)

    def _contribute(self, key: str, node: int, value: float) -> None:
        parts = self._parts.setdefault(key, {})
        parts[node] = value
        if len(parts) == self.place.nnodes:
            result = min(parts.values())
            for writer in self._writers.values():
                self._send(writer, {"op": "reduced", "key": key, "value": result})
            self._resolve(key, result)

    def _resolve(self, key: str, value: float) -> None:
        result = self._results.setdefault(key, asyncio.get_running_loop().create_future())
        if not result.done():
            result.set_result(value)

    async def step(self) -> None:
        """One forward step's collective: on node 0, returns once every node has answered (never while one
        is dead or stopped); elsewhere at once."""
        if self.place.is_head and self._writers:
            await self.steps.run(self._writers, self._send)

    def relay(self, text: str) -> None:
        """Node 0 sends a line for the other nodes to log (no-op elsewhere)."""
        if self.place.is_head:
            for writer in self._writers.values():
                self._send(writer, {"op": "relay", "text": text})

    def rank_died(self, rank: int) -> None:
        """One of this node's rank processes died while the node lives on (an OOM kill)."""
        self._own_dead.setdefault(rank, time.monotonic())

    def views(self) -> list[tuple[NodeSeat, PeerState]]:
        """Every node's seat and what this node knows of its liveness (itself: alive, its dead ranks)."""
        me = PeerState(dead_ranks=dict(self._own_dead))
        return [(seat, me if node == self.place.node_rank else self.peers.get(node, PeerState(closed=True)))
                for node, seat in sorted(self.roster.items())]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for writer in (*self._writers.values(), *self._late):
            writer.close()
        if self._server is not None:
            self._server.close()

    # -- the wire --------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _send(writer: asyncio.StreamWriter, doc: dict[str, Any]) -> None:
        transport = writer.transport
        if writer.is_closing() or transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
            return
        writer.write((json.dumps(doc) + "\n").encode())

    async def _read(self, node: int, reader: asyncio.StreamReader) -> None:
        peer = self.peers[node]
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            while line := await reader.readline():
                peer.heard(self.liveness)
                self._handle(node, json.loads(line))
        peer.closed = True

    def _handle(self, node: int, doc: dict[str, Any]) -> None:
        op = doc.get("op")
        if op == "reduce" and self.place.is_head:
            self._contribute(str(doc["key"]), node, float(doc["value"]))
        elif op == "beat":
            self._beat_received(node, doc)
        elif op == "world":
            self.roster = {seat.node_rank: seat for seat in map(NodeSeat.from_json, doc["nodes"])}
            self._joined.set()
        elif op == "reduced":
            self._resolve(str(doc["key"]), float(doc["value"]))
        elif op == "relay" and self.on_relay is not None:
            self.on_relay(str(doc["text"]))
        elif op == "step":
            self._send(self._writers[0], {"op": "stepped", "id": doc["id"]})
        elif op == "stepped":
            self.steps.answered(node, int(doc["id"]))

    def _beat_received(self, node: int, doc: dict[str, Any]) -> None:
        now = time.monotonic()
        if self.place.is_head:
            self.peers[node].dead_ranks = aged_back(doc.get("dead", {}), now)
        else:
            apply_table(self.peers, doc.get("table", {}), self.place.node_rank, now)

    async def _keep_alive(self) -> None:
        while True:
            now = time.monotonic()
            own = {r: now - t for r, t in self._own_dead.items()}
            if self.place.is_head:
                beat = {"op": "beat", "table": beat_table(self.peers, own, now)}
                for writer in self._writers.values():
                    self._send(writer, beat)
            else:
                self._send(self._writers[0], {"op": "beat", "dead": {str(r): a for r, a in own.items()}})
            await asyncio.sleep(self.liveness.keepalive_s)
