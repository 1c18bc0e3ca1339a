"""What both engines' lines share: ranks and their GPUs, tqdm bars, the traceback site.

Each engine's own prefixes live with it (`sglang/logfmt.py`, `vllm/logfmt.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from console.domain.layout import Layout

# Where the engines and PyTorch live in the images we imitate: the path in their traceback frames.
SITE = "/usr/local/lib/python3.12/dist-packages"


@dataclass(frozen=True, slots=True)
class Rank:
    """One scheduler process of the layout: its GPU and its place in each parallel group."""

    index: int
    """Global rank, 0..gpus_used-1 (replica d's ranks follow replica d-1's); the fit plan's rank."""
    gpu: int
    """CUDA device index: `--base-gpu-id` + index x `--gpu-id-step` (rank r uses GPU r by default)."""
    rank_in_world: int
    """Rank within its replica, 0..tp*pp-1; the fit plan is per replica rank."""
    tp_rank: int
    pp_rank: int
    ep_rank: int
    dp_rank: int | None
    prefix: str
    """The rank part of SGLang's log prefix, e.g. " TP2 EP1" (empty for a single-GPU engine)."""


def build_ranks(layout: Layout, base_gpu_id: int = 0, gpu_id_step: int = 1) -> list[Rank]:
    """All scheduler ranks of a layout, in GPU order, with SGLang's prefixes.

    SGLang's scheduler prefix is " DP{d}" (with a DP rank), " PP{p}" (pp > 1), " TP{t}" (tp > 1) and
    " EP{e}" (ep > 1), where the EP rank is the TP rank divided by tp/ep.
    """
    tp, pp, ep = max(layout.tp, 1), max(layout.pp, 1), max(layout.ep, 1)
    world = tp * pp
    replicas = 1 if layout.dp_attention else max(layout.dp, 1)
    ranks = []
    for replica in range(replicas):
        for r in range(world):
            tp_rank, pp_rank = r % tp, r // tp
            ep_rank = tp_rank // max(tp // ep, 1)
            if layout.dp_attention and layout.dp > 1:
                dp_rank: int | None = tp_rank // max(tp // layout.dp, 1)
            elif layout.dp > 1:
                dp_rank = replica
            else:
                dp_rank = None
            prefix = ""
            if dp_rank is not None:
                prefix += f" DP{dp_rank}"
            if pp > 1:
                prefix += f" PP{pp_rank}"
            if tp > 1:
                prefix += f" TP{tp_rank}"
            if ep > 1:
                prefix += f" EP{ep_rank}"
            index = replica * world + r
            ranks.append(Rank(index, base_gpu_id + index * gpu_id_step, r, tp_rank, pp_rank, ep_rank,
                              dp_rank, prefix))
    return ranks


class UvicornLog(Protocol):
    """Where an engine's HTTP server writes uvicorn's lines (each engine prefixes them its own way)."""

    def uvicorn(self, level: str, message: str) -> None: ...


def format_interval(seconds: float) -> str:
    """tqdm's elapsed/remaining format: `00:07`, or `1:02:03` past an hour."""
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate(n: int, elapsed_s: float) -> str:
    if n <= 0 or elapsed_s <= 0:
        return "?it/s"
    rate = n / elapsed_s
    return f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"


def _timing(n: int, total: int, elapsed_s: float) -> str:
    """tqdm's `[elapsed<remaining, rate]` after a bar's n/total."""
    remaining = format_interval(elapsed_s / n * (total - n)) if n > 0 else "?"
    return f"[{format_interval(elapsed_s)}<{remaining}, {_rate(n, elapsed_s)}]"


def shard_progress(n: int, total: int, elapsed_s: float) -> str:
    """SGLang's safetensors tqdm line, e.g.
    `Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:07<00:08,  3.91it/s]`.
    """
    pct = 100.0 * n / total if total else 100.0
    return f"Loading safetensors checkpoint shards: {pct:3.0f}% Completed | {n}/{total} {_timing(n, total, elapsed_s)}"


def capture_progress(bs: int, avail_gb: float, n: int, total: int, elapsed_s: float) -> str:
    """The CUDA graph capture bar of SGLang 0.5 (`Capturing batches (bs=.. avail_mem=.. GB)`)."""
    pct = 100.0 * n / total if total else 100.0
    filled = int(pct // 10)
    bar = "█" * filled + " " * (10 - filled)
    return (f"Capturing batches (bs={bs} avail_mem={avail_gb:.2f} GB): {pct:3.0f}%|{bar}| {n}/{total} "
            f"{_timing(n, total, elapsed_s)}")
