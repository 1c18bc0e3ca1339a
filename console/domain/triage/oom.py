"""Parse the figures out of PyTorch's CUDA out-of-memory message.

Current PyTorch (2.1+) writes, on one line:

    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. GPU 2 has a total
    capacity of 94.97 GiB of which 136.94 MiB is free. Including non-PyTorch memory, this process has
    94.83 GiB memory in use. Of the allocated memory 93.62 GiB is allocated by PyTorch, and 273.15 MiB
    is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ...

Older PyTorch (1.x, 2.0) writes `Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity;
14.56 GiB already allocated; 3.44 MiB free; 14.77 GiB reserved in total by PyTorch)`. Sizes come
from c10's format_size: bytes, KiB, MiB or GiB with two decimals (TiB accepted in case).
"""

from __future__ import annotations

import re

from console.domain.sizes import format_bytes, parse_size
from console.domain.values import OomFigures

#: Substrings that mark a real CUDA out-of-memory text; nothing else is ever read as an OOM.
OOM_MARKERS = (
    "CUDA out of memory", "CUDA error: out of memory", "CUDA driver error: out of memory",
    "CUDA Error: out of memory",  # sgl-kernel's and custom all-reduce's CUDACHECK
    "[CUDA]: out of memory", "CUDA_ERROR_OUT_OF_MEMORY",  # Triton's driver errors
    "Cuda failure 'out of memory'",  # NCCL's own allocation (`NCCL WARN Cuda failure 'out of memory'`)
    "would exceed allowed memory",  # the cudaMallocAsync allocator's `Allocation on device 0 would exceed ...`
)

_SIZE = r"(\d{1,15}(?:\.\d{1,6})?) ?(bytes|B|KiB|MiB|GiB|TiB)\b"

_TRIED = re.compile(r"Tried to allocate " + _SIZE)
# PyTorch 2.1 spelled it "total capacty".
_CAPACITY = re.compile(r"GPU (\d{1,4}) has a total capac(?:i?)ty of " + _SIZE + r" of which " + _SIZE + " is free")
_FREE = re.compile(_SIZE + r" is free")
_IN_USE = re.compile(r"this process has " + _SIZE + r" memory in use")
_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
_RESERVED = re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated")
_OLD_STYLE = re.compile(
    r"\(GPU (\d{1,4}); " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; "
    + _SIZE + r" free; (?:" + _SIZE + r" allowed; )?" + _SIZE + r" reserved in total by PyTorch\)"
)


def size_to_bytes(number: str, unit: str) -> int:
    """Bytes of a size as PyTorch prints it, e.g. ("672.00", "MiB") -> 704643072."""
    return parse_size(f"{number} {unit}")


def parse_oom(text: str) -> OomFigures | None:
    """Parse a CUDA OOM message into byte figures.

    Args:
        text: A log line or exception message.

    Returns:
        The figures (each None when the message lacks it), or None when the text is not a CUDA OOM.
    """
    start = -1
    for marker in OOM_MARKERS:
        start = text.find(marker)
        if start >= 0:
            break
    if start < 0:
        return None
    # The figures follow the marker; searching from it keeps a long line cheap.
    tried = _TRIED.search(text, start)
    tried_bytes = size_to_bytes(*tried.groups()) if tried else None
    capacity = _CAPACITY.search(text, start)
    if capacity:
        in_use = _IN_USE.search(text, capacity.end())
        allocated = _ALLOCATED.search(text, capacity.end())
        reserved = _RESERVED.search(text, capacity.end())
        return OomFigures(
            gpu=int(capacity.group(1)),
            tried_bytes=tried_bytes,
            total_bytes=size_to_bytes(capacity.group(2), capacity.group(3)),
            free_bytes=size_to_bytes(capacity.group(4), capacity.group(5)),
            in_use_bytes=size_to_bytes(*in_use.groups()) if in_use else None,
            allocated_bytes=size_to_bytes(*allocated.groups()) if allocated else None,
            reserved_unallocated_bytes=size_to_bytes(*reserved.groups()) if reserved else None,
        )
    old = _OLD_STYLE.search(text, start)
    if old:
        allocated_b = size_to_bytes(old.group(4), old.group(5))
        reserved_total_b = size_to_bytes(old.group(10), old.group(11))
        return OomFigures(
            gpu=int(old.group(1)),
            tried_bytes=tried_bytes,
            total_bytes=size_to_bytes(old.group(2), old.group(3)),
            free_bytes=size_to_bytes(old.group(6), old.group(7)),
            in_use_bytes=None,
            allocated_bytes=allocated_b,
            reserved_unallocated_bytes=max(reserved_total_b - allocated_b, 0),
        )
    free = _FREE.search(text, start)  # a message cut or elided by its poster may still say what was free
    return OomFigures(
        gpu=None,
        tried_bytes=tried_bytes,
        total_bytes=None,
        free_bytes=size_to_bytes(*free.groups()) if free else None,
        in_use_bytes=None,
    )


def oom_summary(figures: OomFigures, rank: str | None) -> str:
    """Plain words for an OOM, e.g. "CUDA OOM on GPU 2 (TP2): tried 672.00 MiB with 136.94 MiB free of 94.97 GiB"."""
    head = "CUDA OOM" + (f" on GPU {figures.gpu}" if figures.gpu is not None else "")
    head += f" ({rank})" if rank else ""
    parts = []
    if figures.tried_bytes is not None:
        parts.append(f"tried {format_bytes(figures.tried_bytes)}")
    if figures.free_bytes is not None and figures.total_bytes is not None:
        parts.append(f"with {format_bytes(figures.free_bytes)} free of {format_bytes(figures.total_bytes)}")
    return f"{head}: {' '.join(parts)}" if parts else f"{head}: out of memory (no figures in the message)"
