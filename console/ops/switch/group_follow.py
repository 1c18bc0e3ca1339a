"""Watching one start over several hosts: a watch per node, the head's readiness, every node's failures.

Each node's own journal, unit state (and, on the head, `/health`) are watched as a one-host start is
(watch.py), its events tagged with the node. The start is READY when the head says so and no node has
failed; it FAILED as soon as any node's watch says so, with the decisive finding taken over every node's
journal, oldest first, once the others have had a moment to report theirs: a worker's OOM or NCCL error
wins over the head's watchdog timeout that follows it. While nodes rendezvous, a node that has not
joined after RENDEZVOUS_NOTE_S is named, every RENDEZVOUS_NOTE_S, with how long it has kept the others
waiting.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from console.domain.triage import decisive
from console.domain.values import Finding, Phase
from console.hosts.base import Host
from console.ops.cluster import head_address
from console.ops.switch.cancel import stop_tasks
from console.ops.switch.events import FAILED, TIMEOUT, StepEvent
from console.ops.switch.start_follow import StartFollower, Verdict
from console.ops.switch.starter_protocol import Starter

#: How long the other nodes may still report a cause once one node's start has failed.
NODES_GRACE_S = 1.0
#: How often a node that has not joined the rendezvous is named (and the least wait that names it).
RENDEZVOUS_NOTE_S = 10.0
_PAST = (Phase.LOADING_WEIGHTS, Phase.KV_CACHE, Phase.CUDA_GRAPHS, Phase.HTTP_UP, Phase.WARMING_UP, Phase.READY)
_BEGAN = (Phase.INIT_DISTRIBUTED, *_PAST)


class GroupFollower:
    """The watches of one start's nodes, head first, and the start's one verdict."""

    def __init__(self, starter: Starter, nodes: list[Host], unit: str, *, layout: str, started_mono: float,
                 rollback: bool) -> None:
        self.starter = starter
        self.nodes = nodes
        self.layout = layout
        self.started_mono = started_mono
        self.rollback = rollback
        self.watches = [
            StartFollower(node, starter.service, unit, layout=layout, emit=starter.emit, started_mono=started_mono,
                       rollback=rollback, state_poll_s=starter.state_poll_s, health_poll_s=starter.health_poll_s,
                       node=node.name, decides_ready=rank == 0)
            for rank, node in enumerate(nodes)
        ]  # fmt: skip

    async def run(self, cursors: list[str | None], *, timeout_s: float) -> Verdict:
        rank_of = {asyncio.create_task(w.run(after_cursor=c, timeout_s=timeout_s), name=f"watch-{w.host.name}"): r
                   for r, (w, c) in enumerate(zip(self.watches, cursors, strict=True))}  # fmt: skip
        notes = asyncio.create_task(self._note_rendezvous(), name="rendezvous-notes")
        pending = set(rank_of)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                verdicts = {rank_of[t]: t.result() for t in done}
                failed = [v for v in verdicts.values() if v.outcome in (FAILED, TIMEOUT)]
                if failed:
                    if pending:
                        await asyncio.wait(pending, timeout=NODES_GRACE_S)  # the others' own causes
                    return self._failed(min(failed, key=lambda v: v.decisive_ts))
                if 0 in verdicts:  # the head decided (workers never decide READY): the start's verdict
                    return verdicts[0]
            raise AssertionError("the head's watch always ends with a verdict")
        finally:
            await stop_tasks([*rank_of, notes])

    def _failed(self, first: Verdict) -> Verdict:
        """The start's failure: the decisive finding over every node's journal, each named by its node."""
        tagged: list[Finding] = []
        for rank, watch in enumerate(self.watches):
            where = f"{watch.host.name} (node-rank {rank})"
            tagged += [replace(f, summary=f"on {where}: {f.summary}",
                               rank=f"{watch.host.name} {f.rank}" if f.rank else watch.host.name)
                       for f in watch.findings]  # fmt: skip
        tagged.sort(key=lambda f: f.ts if f.ts is not None else float("inf"))
        root = decisive(tagged)
        if root is None:
            return first
        return Verdict(FAILED, root.summary, root, min(first.decisive_ts, root.ts or first.decisive_ts),
                       time.time(), Phase.FAILED)  # fmt: skip

    async def _note_rendezvous(self) -> None:
        """Name what keeps the nodes waiting at the rendezvous, every RENDEZVOUS_NOTE_S, until every node
        is past it: a node that has not begun `Init torch distributed`, or, when all have begun and none
        got further, a node that cannot reach the head's rendezvous port (a firewall, the wrong address
        or interface), tried from that node itself."""
        while True:
            await asyncio.sleep(RENDEZVOUS_NOTE_S)
            waited = time.monotonic() - self.started_mono
            began = [w.phase in _BEGAN for w in self.watches]
            past = [w.phase in _PAST for w in self.watches]
            if all(past):
                return
            if not any(began):
                continue  # nobody has reached init distributed yet: still loading the engine itself
            if any(past):
                continue  # the rendezvous is over: the nodes load at their own pace
            for rank, (watch, ok) in enumerate(zip(self.watches, began, strict=True)):
                if not ok:
                    self._note(watch, waited, f"waiting on node-rank {rank} ({watch.host.name}): no 'Init torch "
                               f"distributed' after {waited:.0f} s")  # fmt: skip
            if all(began):
                await self._note_reach(waited)

    async def _note_reach(self, waited: float) -> None:
        service = self.starter.service
        assert service.cluster is not None
        address, port = head_address(service, self.nodes[0].config), service.cluster.dist_port
        unreachable = []
        for rank, watch in list(enumerate(self.watches))[1:]:
            node = watch.host.node
            if node is None:
                continue
            try:
                _, writer = await node.dial(address, port)
                writer.close()
            except Exception as exc:
                unreachable.append((rank, watch, exc))
        for rank, watch, exc in unreachable:
            self._note(watch, waited, f"node-rank {rank} ({watch.host.name}) cannot reach the rendezvous at "
                       f"{address}:{port}: {exc}")  # fmt: skip
        if not unreachable:
            self._note(self.watches[0], waited, f"every node waits at the rendezvous ({address}:{port}) after "
                       f"{waited:.0f} s; each reaches it: look for a node that hangs before joining, or NCCL's "
                       "interface (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)")  # fmt: skip

    def _note(self, watch: StartFollower, waited: float, detail: str) -> None:
        self.starter.emit(StepEvent(layout=self.layout, elapsed_s=waited, rollback=self.rollback, node=watch.host.name,
                                    step="rendezvous", detail=detail, unit=watch.unit))  # fmt: skip
