"""Node 0's forward steps over several hosts: one round trip to every other node per step.

A step's collective completes only once every rank has entered it, so node 0 asks each node and waits
for every answer: a node that died or was stopped (SIGSTOP) holds the step, and every request with it,
until it answers again. Steps that overlap (several requests decoding at once) share one round. When the
last round completed is what SGLang's watchdog and vLLM's RPC timeout judge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any


class StepRounds:
    """The rounds of step messages node 0 sends, and the answers it waits for."""

    def __init__(self) -> None:
        self._round: asyncio.Future[None] | None = None
        self._round_id = 0
        self._waiting: set[int] = set()
        self.last_done = time.monotonic()
        """When the last round completed (monotonic)."""

    async def run(self, nodes: Mapping[int, Any], send: Callable[[Any, dict[str, Any]], None]) -> None:
        """Start a round to `nodes` (writers by node rank) unless one is under way; wait until it completes."""
        if self._round is None or self._round.done():
            self._round_id += 1
            self._round = asyncio.get_running_loop().create_future()
            self._waiting = set(nodes)
            for writer in nodes.values():
                send(writer, {"op": "step", "id": self._round_id})
        await asyncio.shield(self._round)

    def answered(self, node: int, round_id: int) -> None:
        """A node's answer to a round (an answer to an old round, after SIGCONT, is ignored)."""
        if self._round is None or self._round.done() or round_id != self._round_id:
            return
        self._waiting.discard(node)
        if not self._waiting:
            self.last_done = time.monotonic()
            self._round.set_result(None)
