"""Communication per collective: latency plus size over bandwidth, for the link it crosses.

The forms follow GenZ (`GenZ/collective_times.py`) and aiconfigurator (`operators/communication.rs`):
- ring all-reduce: base + 2(n-1) hops + 2(n-1)/n x bytes / busbw (NCCL's ring is 2(n-1) sequential steps,
  which is what makes TP costly where a hop is slow: ~14 us through host memory on PCIe without P2P);
- all-to-all (EP dispatch, combine): base + one hop + (n-1)/n x bytes / busbw (all peers at once);
- send/recv (a PP handoff): base + one hop + bytes / busbw.
A collective over more GPUs than one node holds crosses the network, the slowest link it uses.
`latency_scale` multiplies every latency term: calibration moves it per host and engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.perf.hardware import LinkKind


@dataclass(frozen=True, slots=True)
class CollectiveCost:
    """One collective's time split into its latency and its bandwidth parts, in seconds."""

    latency_s: float
    transfer_s: float


def all_reduce(link: LinkKind, ranks: int, nbytes: float) -> CollectiveCost:
    """A ring all-reduce of `nbytes` over `ranks` GPUs."""
    if ranks <= 1:
        return CollectiveCost(0.0, 0.0)
    latency_us = link.allreduce_base_us + 2 * (ranks - 1) * link.hop_us
    transfer = 2 * (ranks - 1) / ranks * nbytes / (link.busbw_gbs * 1e9)
    return CollectiveCost(latency_us * 1e-6, transfer)


def all_to_all(link: LinkKind, ranks: int, nbytes: float) -> CollectiveCost:
    """An all-to-all in which each rank sends `nbytes` in all, spread over its peers."""
    if ranks <= 1:
        return CollectiveCost(0.0, 0.0)
    latency_us = link.a2a_base_us + link.hop_us
    transfer = (ranks - 1) / ranks * nbytes / (link.busbw_gbs * 1e9)
    return CollectiveCost(latency_us * 1e-6, transfer)


def send_recv(link: LinkKind, nbytes: float) -> CollectiveCost:
    """One point-to-point handoff of `nbytes` (a pipeline stage passing its activations on)."""
    latency_us = link.allreduce_base_us + link.hop_us
    return CollectiveCost(latency_us * 1e-6, nbytes / (link.busbw_gbs * 1e9))
