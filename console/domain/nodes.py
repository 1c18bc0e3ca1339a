"""A layout over several hosts: which node runs which ranks, and the flags each node's engine takes.

SGLang runs the same command on every node with `--nnodes N --node-rank R --dist-init-addr HEAD:PORT`
(only node-rank 0 serves HTTP). vLLM without Ray takes `--nnodes N --node-rank R --master-addr HEAD
--master-port PORT`, and `--headless` on the nodes that serve no API (shared/facts/multinode.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.layout import Layout, gpus_used
from console.domain.values import Engine


@dataclass(frozen=True, slots=True)
class NodePlace:
    """One node's place in a layout that spans `nnodes` hosts."""

    node_rank: int
    nnodes: int
    head_address: str
    port: int

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0


def rendezvous_address(head: str, port: int) -> str:
    """`HOST:PORT`, an IPv6 literal in brackets."""
    return f"[{head}]:{port}" if ":" in head and not head.startswith("[") else f"{head}:{port}"


def node_args(engine: Engine | str, place: NodePlace) -> tuple[str, ...]:
    """The engine flags that make a node node-rank R of N (empty for a layout on one node)."""
    if place.nnodes <= 1:
        return ()
    common = ("--nnodes", str(place.nnodes), "--node-rank", str(place.node_rank))
    if Engine(engine) is Engine.VLLM:
        head = place.head_address.strip("[]")
        extra = ("--master-addr", head, "--master-port", str(place.port))
        return common + extra + (() if place.is_head else ("--headless",))
    return common + ("--dist-init-addr", rendezvous_address(place.head_address, place.port))


def node_ranks(layout: Layout, engine: Engine | str, place: NodePlace) -> range:
    """The global ranks a node runs: the world split evenly, node R holding the R-th slice."""
    world = gpus_used(layout, engine)
    per_node = world // max(place.nnodes, 1)
    return range(place.node_rank * per_node, (place.node_rank + 1) * per_node)
