"""GPU and link figures from `hardware.json` beside this module (each figure names its source).

A GPU is looked up by its short name (`H100-SXM`), any name nvidia-smi or torch prints for it
(`NVIDIA H100 80GB HBM3`), case and spacing aside. A GPU the file does not know is a UsageError that
names the file: the model never guesses a card's bandwidth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from console.errors import UsageError

HARDWARE_FILE = Path(__file__).with_name("hardware.json")
#: The links a host can have between its GPUs (`network` is only ever between nodes).
INTERCONNECTS = ("nvlink", "pcie-p2p", "pcie")


@dataclass(frozen=True, slots=True)
class GpuKind:
    """One GPU model's figures: memory bandwidth, dense peak TFLOPS per compute dtype."""

    key: str
    names: tuple[str, ...]
    memory_mib: int
    mem_bw_tbs: float
    tflops: tuple[tuple[str, float], ...]
    nvlink_gbs: float | None
    source: str

    def peak_tflops(self, dtype: str) -> float:
        """Dense peak for `dtype` (`bf16`, `fp8`, `fp4`); a dtype the card lacks runs at the next wider one."""
        table = dict(self.tflops)
        for candidate in {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16")}.get(dtype, ("bf16",)):
            if candidate in table:
                return table[candidate]
        return table["bf16"]


@dataclass(frozen=True, slots=True)
class LinkKind:
    """A link's collective costs: ring all-reduce = base + 2(n-1) hops + 2(n-1)/n bytes / busbw."""

    key: str
    allreduce_base_us: float
    hop_us: float
    busbw_gbs: float
    a2a_base_us: float
    source: str


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


@cache
def _table(path: str) -> tuple[dict[str, GpuKind], dict[str, LinkKind]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        gpus = {key: _gpu(key, entry) for key, entry in data["gpus"].items()}
        links = {key: LinkKind(key=key, **entry) for key, entry in data["links"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a hardware table: {exc}") from None
    return gpus, links


def _gpu(key: str, entry: dict[str, Any]) -> GpuKind:
    return GpuKind(
        key=key,
        names=tuple(entry["names"]),
        memory_mib=int(entry["memory_mib"]),
        mem_bw_tbs=float(entry["mem_bw_tbs"]),
        tflops=tuple((k, float(v)) for k, v in entry["tflops"].items()),
        nvlink_gbs=entry.get("nvlink_gbs"),
        source=str(entry["source"]),
    )


def gpu_kind(name: str, path: Path = HARDWARE_FILE) -> GpuKind:
    """The GPU called `name` (short key or a printed name).

    Raises:
        UsageError: the file does not know it (the message names the file).
    """
    gpus, _ = _table(str(path))
    wanted = _norm(name)
    for kind in gpus.values():
        if wanted in {_norm(kind.key), *(_norm(n) for n in kind.names)}:
            return kind
    known = ", ".join(gpus)
    raise UsageError(f"{path}: no figures for GPU {name!r} (known: {known})")


def link_kind(key: str, path: Path = HARDWARE_FILE) -> LinkKind:
    """The link called `key` (`nvlink`, `pcie-p2p`, `pcie`, `network`).

    Raises:
        UsageError: the file does not know it.
    """
    _, links = _table(str(path))
    if key not in links:
        raise UsageError(f"{path}: no figures for link {key!r} (known: {', '.join(links)})")
    return links[key]


def default_interconnect(gpu: GpuKind) -> str:
    """NVLink where the part has it (SXM, OAM), PCIe without P2P otherwise (the cautious guess)."""
    return "nvlink" if gpu.nvlink_gbs and gpu.nvlink_gbs >= 300 else "pcie"
