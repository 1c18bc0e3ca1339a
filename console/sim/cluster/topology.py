"""Where a node of a service over several hosts sits: its place, its ranks and its GPUs.

Both engines split the world into equal, contiguous blocks of global ranks, one per node, in node-rank
order: SGLang's launcher gives node R the TP ranks `tp_per_node * R ...` (or the PP stage R with PP
across nodes), vLLM's multiprocess executor the ranks `local_world_size * node_rank_within_dp ...`.
Local GPU i of a node serves its i-th rank (`--base-gpu-id + i x --gpu-id-step`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.sim.logfmt import Rank

#: The variables an engine reads for the address other nodes reach it at (vLLM's and SGLang's get_ip()).
HOST_IP_VARS = ("VLLM_HOST_IP", "SGLANG_HOST_IP")


@dataclass(frozen=True, slots=True)
class NodePlace:
    """This process's node in the service: how many there are, which one it is, where node 0 listens."""

    nnodes: int
    node_rank: int
    head_host: str
    head_port: int

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0

    @property
    def spans_hosts(self) -> bool:
        return self.nnodes > 1


def split_host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `[IPv6]:PORT` as (host, port).

    Raises:
        ValueError: one line naming what is wrong.
    """
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if not sep:
            raise ValueError(f"invalid IPv6 address format: missing ']' in {text!r}")
    else:
        host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def node_ranks(ranks: Sequence[Rank], nnodes: int, node_rank: int, base_gpu_id: int = 0,
               gpu_id_step: int = 1) -> list[Rank]:
    """This node's block of the world's ranks, each on its local GPU."""
    per_node = len(ranks) // max(nnodes, 1)
    block = ranks[node_rank * per_node:(node_rank + 1) * per_node]
    return [dataclasses.replace(rank, gpu=base_gpu_id + i * gpu_id_step) for i, rank in enumerate(block)]


def concrete_ip(host: str | None) -> str | None:
    """`host` if it names one address (not a wildcard, not a name), else None."""
    if not host or host in ("0.0.0.0", "::", "") or not all(part.isdigit() for part in host.split(".")):
        return None
    return host


def node_ip(bind_host: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The address this node announces to the others: VLLM_HOST_IP or SGLANG_HOST_IP, else `--host` when it
    names one IPv4 address (two simulated hosts on one machine differ by loopback address, 127.0.0.2...)."""
    env = os.environ if env is None else env
    for var in HOST_IP_VARS:
        if env.get(var):
            return env[var]
    return concrete_ip(bind_host)
