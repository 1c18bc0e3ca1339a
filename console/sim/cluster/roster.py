"""Who is in the job: each node's address and its rank processes, as the rendezvous exchanges them.

Every node announces its seat when it joins; node 0 sends the full roster back once all have joined, so
each node (and its NCCL RAS emulation) knows every rank's process, GPU and host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RankSeat:
    """One rank's process: its global rank, pid and GPU (CUDA's index and nvidia-smi's)."""

    rank: int
    pid: int
    cuda_dev: int
    nvml_dev: int

    def to_json(self) -> dict[str, int]:
        return {"rank": self.rank, "pid": self.pid, "cuda": self.cuda_dev, "nvml": self.nvml_dev}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RankSeat:
        return cls(int(doc["rank"]), int(doc["pid"]), int(doc["cuda"]), int(doc["nvml"]))


@dataclass(frozen=True, slots=True)
class NodeSeat:
    """One node: its rank in the service, the address it is reached at, its launcher's pid and its ranks."""

    node_rank: int
    ip: str
    pid: int
    ranks: tuple[RankSeat, ...]

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node_rank, "ip": self.ip, "pid": self.pid,
                "ranks": [seat.to_json() for seat in self.ranks]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> NodeSeat:
        return cls(int(doc["node"]), str(doc["ip"]), int(doc["pid"]),
                   tuple(RankSeat.from_json(r) for r in doc["ranks"]))

    def with_ip(self, ip: str) -> NodeSeat:
        return NodeSeat(self.node_rank, ip, self.pid, self.ranks)
