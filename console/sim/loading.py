"""Per-GPU memory of the simulated engine, and its weight loading tensor by tensor.

Each rank owns one GPU. What PyTorch would see there is modelled in bytes: the CUDA context and NCCL
buffers (non-PyTorch memory), the tensors allocated so far, and a little memory the caching allocator
reserved but cannot hand out (fragmentation). A tensor that is larger than the free memory raises the
OOM, with exactly these figures, as the caching allocator would.

All ranks load at the same nominal rate (about 6.3 GiB/s per GPU, the story's pace); a seeded jitter of
a few percent per rank, fixed per layout, decides which GPU overflows first.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from console.domain.layout import Layout
from console.domain.sizes import GIB, MIB, format_bytes
from console.sim.logfmt import Rank

LOAD_RATE_BYTES_PER_S = 6.3 * GIB
RATE_JITTER = 0.03
# Chosen so the demo (Kimi K2.6, TP4 EP2) overflows on GPU 2 first, as in the story's log.
_JITTER_SALT = "serve-console-sim-7"


def layout_rng(layout: Layout, purpose: str) -> random.Random:
    """A random source fixed per layout and purpose, so each layout's story repeats exactly."""
    key = f"{_JITTER_SALT}|{layout.name}|{purpose}"
    return random.Random(zlib.crc32(key.encode()))


def _bytes_between_mib(rng: random.Random, low_mib: int, high_mib: int) -> int:
    """A size from `low_mib` to `high_mib` MiB, to the byte (real footprints are not whole MiB)."""
    return rng.randint(low_mib, high_mib) * MIB + rng.randint(0, MIB - 1)


@dataclass
class RankMemory:
    """One GPU as the rank's PyTorch sees it, in bytes."""

    gpu: int
    """The card's nvidia-smi index (where the ledger books it; CUDA may number it differently)."""
    capacity_bytes: int
    """torch's total capacity of the card (94.97 GiB for a 97887 MiB card)."""
    other_bytes: int = 0
    """Held by other live processes on this GPU when loading began."""
    context_bytes: int = 0
    nccl_bytes: int = 0
    allocated_bytes: int = 0
    reserved_unallocated_bytes: int = 0

    @property
    def non_torch_bytes(self) -> int:
        return self.context_bytes + self.nccl_bytes

    @property
    def in_use_bytes(self) -> int:
        """This process's footprint on the GPU (what nvidia-smi lists for it)."""
        return self.non_torch_bytes + self.allocated_bytes + self.reserved_unallocated_bytes

    @property
    def free_bytes(self) -> int:
        return max(0, self.capacity_bytes - self.other_bytes - self.in_use_bytes)

    @property
    def used_mib(self) -> int:
        return -(-self.in_use_bytes // MIB)

    def avail_gb(self) -> float:
        """SGLang's `avail mem=` figure (GiB, printed as GB)."""
        return self.free_bytes / GIB


@dataclass(frozen=True, slots=True)
class OomEvent:
    """The allocation that did not fit, with the moment (load seconds) it was attempted."""

    rank: Rank
    tensor_name: str
    tried_bytes: int
    at_s: float


@dataclass
class RankLoader:
    """Loads one rank's plan: tensor i is allocated when the read position reaches its start."""

    rank: Rank
    memory: RankMemory
    plan: Sequence
    """TensorAlloc items (name, layer, nbytes), in load order."""
    rate_bytes_per_s: float
    _index: int = 0
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        pos = 0
        for tensor in self.plan:
            self._starts.append(pos)
            pos += int(tensor.nbytes)
        self.total_bytes = pos

    @property
    def finish_s(self) -> float:
        """Load seconds at which this rank has read all its weights."""
        return self.total_bytes / self.rate_bytes_per_s

    def advance(self, load_s: float) -> OomEvent | None:
        """Allocate every tensor whose read starts by `load_s`; the first that does not fit stops it."""
        position = load_s * self.rate_bytes_per_s
        while self._index < len(self.plan) and self._starts[self._index] <= position:
            tensor = self.plan[self._index]
            if int(tensor.nbytes) > self.memory.free_bytes:
                return OomEvent(self.rank, tensor.name, int(tensor.nbytes),
                                self._starts[self._index] / self.rate_bytes_per_s)
            self.memory.allocated_bytes += int(tensor.nbytes)
            self._index += 1
        return None

    def progress_fraction(self, load_s: float) -> float:
        """Bytes read by `load_s` over the rank's total (drives the shard progress bar)."""
        if not self.total_bytes:
            return 1.0
        return min(1.0, load_s * self.rate_bytes_per_s / self.total_bytes)


def make_memories(
    physical: Sequence[int], layout: Layout, capacity_bytes: int, other_bytes: dict[int, int]
) -> list[RankMemory]:
    """Each rank's GPU (by nvidia-smi index) right after its CUDA context is created (500-600 MiB)."""
    rng = layout_rng(layout, "memory")
    return [
        RankMemory(gpu=gpu, capacity_bytes=capacity_bytes, other_bytes=other_bytes.get(gpu, 0),
                   context_bytes=_bytes_between_mib(rng, 520, 590))
        for gpu in physical
    ]


def nccl_buffer_bytes(layout: Layout, rng: random.Random) -> int:
    """NCCL's communicator buffers and the custom all-reduce workspace (none on a single GPU)."""
    world = layout.tp * layout.pp
    if world <= 1:
        return 0
    return _bytes_between_mib(rng, 360, 420)


def fragmentation_bytes(rng: random.Random) -> int:
    """Memory the caching allocator holds but cannot reuse for a big tensor (a few hundred MiB)."""
    return _bytes_between_mib(rng, 180, 300)


def rank_rates(ranks: Sequence[Rank], layout: Layout) -> list[float]:
    """Each rank's load rate: the nominal rate with a fixed few-percent jitter."""
    rng = layout_rng(layout, "rate")
    return [LOAD_RATE_BYTES_PER_S * (1 + rng.uniform(-RATE_JITTER, RATE_JITTER)) for _ in ranks]


def cuda_oom_message(
    *,
    gpu: int,
    tried_bytes: int,
    capacity_bytes: int,
    free_bytes: int,
    in_use_bytes: int,
    allocated_bytes: int,
    reserved_unallocated_bytes: int,
    alloc_conf: str = "PYTORCH_CUDA_ALLOC_CONF",
) -> str:
    """PyTorch's CUDA OOM message with these figures (`alloc_conf`: newer PyTorch says PYTORCH_ALLOC_CONF)."""
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {format_bytes(tried_bytes)}. "
        f"GPU {gpu} has a total capacity of {format_bytes(capacity_bytes)} of which "
        f"{format_bytes(free_bytes)} is free. Including non-PyTorch memory, this process has "
        f"{format_bytes(in_use_bytes)} memory in use. Of the allocated memory "
        f"{format_bytes(allocated_bytes)} is allocated by PyTorch, and "
        f"{format_bytes(reserved_unallocated_bytes)} is reserved by PyTorch but unallocated. If reserved "
        f"but unallocated memory is large try setting {alloc_conf}=expandable_segments:True to "
        "avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
