"""How vLLM's processes write their lines: `(Worker_TP1_EP1 pid=3191) INFO 05-26 00:05:22 [file.py:N] msg`.

vLLM 0.32 prefixes every logger line a child process writes with its process name and pid: the API
server (`APIServer`), one engine core per data-parallel rank (`EngineCore`, or `EngineCore_DP0` ... with
more than one), and one worker process per GPU, even for one GPU (the multiprocess executor). A worker
is `Worker` until its distributed group is up, then `Worker` + `_DP{d}` (dp > 1) + `_PP{p}` (pp > 1) +
`_TP{t}` (tp > 1) + `_EP{e}` (expert parallel on). What a process prints itself (tqdm bars, a traceback
at exit, uvicorn's lines) carries no prefix. Lines are flushed one by one.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from console.domain.layout import Layout
from console.sim.logfmt import Rank


@dataclass(frozen=True, slots=True)
class Proc:
    """One vLLM process as its log prefix names it."""

    name: str
    pid: int

    @property
    def prefix(self) -> str:
        return f"({self.name} pid={self.pid})"

    def renamed(self, name: str) -> Proc:
        """The same process under the name it takes later (a worker once its group is up)."""
        return Proc(name, self.pid)


def core_name(dp_rank: int, dp: int) -> str:
    """The engine core's process name: `EngineCore`, or `EngineCore_DP{d}` with data parallelism."""
    return "EngineCore" if dp <= 1 else f"EngineCore_DP{dp_rank}"


def worker_name(layout: Layout, dp_rank: int, pp_rank: int, tp_rank: int, ep_rank: int) -> str:
    """vLLM's worker process name once its group is up, e.g. `Worker_TP1_EP1` or `Worker_PP1_TP0`."""
    tp, pp, dp = max(layout.tp, 1), max(layout.pp, 1), max(layout.dp, 1)
    name = "Worker"
    if dp > 1:
        name += f"_DP{dp_rank}"
    if pp > 1:
        name += f"_PP{pp_rank}"
    if tp > 1:
        name += f"_TP{tp_rank}"
    if layout.ep > 1:
        name += f"_EP{ep_rank}"
    return name


def build_vllm_ranks(layout: Layout) -> list[Rank]:
    """Every worker of a layout in GPU order; `prefix` holds the process name.

    Data-parallel replica d uses GPUs d x tp x pp onwards; the expert-parallel group spans DP x TP, so a
    worker's EP rank is d x tp + its TP rank.
    """
    tp, pp, dp = max(layout.tp, 1), max(layout.pp, 1), max(layout.dp, 1)
    world = tp * pp
    ranks = []
    for d in range(dp):
        for r in range(world):
            tp_rank, pp_rank = r % tp, r // tp
            ep_rank = d * tp + tp_rank
            index = d * world + r
            name = worker_name(layout, d, pp_rank, tp_rank, ep_rank)
            ranks.append(Rank(index, index, r, tp_rank, pp_rank, ep_rank, d if dp > 1 else None, name))
    return ranks


class VllmLog:
    """Writes vLLM-style lines to stdout; pids of the simulated child processes follow this one's."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.api = Proc("APIServer", os.getpid())

    def proc(self, name: str, offset: int) -> Proc:
        """A child process `offset` pids after the API server (the real ones are spawned in order)."""
        return Proc(name, self.api.pid + offset)

    def raw(self, proc: Proc | None, text: str = "") -> None:
        """A line as written: with a process's prefix, or bare (`proc` None: tqdm, stderr, uvicorn)."""
        try:
            self.stream.write(f"{proc.prefix} {text}\n" if proc is not None else f"{text}\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; keep running like a daemon would

    def line(self, proc: Proc | None, level: str, source: str, message: str) -> None:
        """A logger line: `(APIServer pid=1) INFO 05-26 00:05:01 [api_utils.py:286] message` (no prefix for
        a process that never names itself, as `vllm serve --headless`'s own)."""
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.raw(proc, f"{level} {stamp} [{source}] {message}")

    def info(self, proc: Proc | None, source: str, message: str) -> None:
        self.line(proc, "INFO", source, message)

    def uvicorn(self, level: str, message: str) -> None:
        """A uvicorn line, which vLLM does not prefix: `INFO:     message`."""
        self.raw(None, f"{(level + ':').ljust(9)} {message}")
