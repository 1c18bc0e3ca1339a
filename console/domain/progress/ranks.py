"""Which rank broke: the service's GPUs compared with each other during a stall.

NVML's utilisation is the share of time a kernel ran, so a kernel spinning in a collective reads 96-100 %
while the card draws near idle power (vllm#46097: "all ranks spin at SM~96%/mem=0%/~15W";
eugr/spark-vllm-docker#260: 96 % at 16-27 W against ~45 W healthy). A rank that diverged is the odd one
out: idle at 0 % while its peers spin, or the one still computing at full power. When every GPU looks the
same, the ranks are all inside one collective that never completes, and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: At or above this SM utilisation a GPU is busy (a kernel ran nearly all the time).
BUSY_UTIL_PCT = 90
#: At or below it, idle.
IDLE_UTIL_PCT = 5
#: A busy GPU drawing at most this is "near idle power": spinning, not computing (a data-centre card
#: idles at 60-90 W and computes at 300-700 W; the reports' small cards spin at 15-27 W).
SPIN_POWER_W = 120.0


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU of the service at the verdict: its index, node and what the GPU source says."""

    index: int
    util_pct: float | None
    power_w: float | None = None
    node: str | None = None

    def name(self) -> str:
        return f"GPU {self.index} on {self.node}" if self.node else f"GPU {self.index}"


def _kind(g: GpuReading) -> str:
    if g.util_pct is None:
        return "unread"
    if g.util_pct >= BUSY_UTIL_PCT:
        return "spin" if g.power_w is not None and g.power_w <= SPIN_POWER_W else "busy"
    return "idle" if g.util_pct <= IDLE_UTIL_PCT else "partly busy"


def _group_words(gpus: Sequence[GpuReading], kind: str) -> str:
    util = max(g.util_pct or 0 for g in gpus)
    watts = [g.power_w for g in gpus if g.power_w is not None]
    power = f" ({max(watts):.0f} W)" if watts else ""
    n = f"{len(gpus)} GPUs" if len(gpus) > 1 else gpus[0].name()
    verb = "spin" if len(gpus) > 1 else "spins"
    if kind == "spin":
        return f"{n} {verb} at {util:.0f}% near idle power{power}"
    if kind == "busy":
        return f"{n} {'compute' if len(gpus) > 1 else 'computes'} at {util:.0f}%{power}"
    if kind == "idle":
        return f"{n} idle at {util:.0f}%{power}"
    return f"{n} {kind} at {util:.0f}%{power}"


def rank_words(gpus: Sequence[GpuReading]) -> tuple[tuple[str, ...], str]:
    """The GPUs that differ from the rest, named, and one sentence; (), "..." when all look alike."""
    read = [g for g in gpus if g.util_pct is not None]
    if not read:
        return (), "no GPU reading of the service's ranks"
    groups: dict[str, list[GpuReading]] = {}
    for g in read:
        groups.setdefault(_kind(g), []).append(g)
    if len(groups) == 1:
        kind, members = next(iter(groups.items()))
        alike = _group_words(members, kind).replace(f"{len(members)} GPUs", f"all {len(members)} GPUs", 1)
        hint = " (a collective that never completes)" if kind == "spin" else ""
        return (), f"all ranks look alike: {alike}{hint}"
    ordered = sorted(groups.items(), key=lambda kv: (len(kv[1]), kv[0]))
    odd_kind, odd = ordered[0]
    rest = [g for _, members in ordered[1:] for g in members]
    rest_kind = ordered[-1][0]
    names = tuple(g.name() for g in sorted(odd, key=lambda g: (g.node or "", g.index)))
    if len(odd) == 1:
        first = _group_words(odd, odd_kind)
    else:
        first = f"{', '.join(names)} {odd_kind} at {max(g.util_pct or 0 for g in odd):.0f}%"
    return names, f"{first} while {_group_words(rest, rest_kind)}"
