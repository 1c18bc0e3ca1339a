"""The simulated host's GPU memory ledger: a directory of small JSON files.

`gpus.json` is the inventory (what `nvidia-smi -L` would list); each running engine keeps a
`proc-<pid>.json` with the MiB it holds per GPU, rewritten atomically as it allocates and removed when
it exits. Readers add the live processes up, so the ledger needs no daemon and no locks. A file whose
pid is dead (or a zombie) is ignored: an engine killed with -9 frees its memory, as the driver would.

Stdlib only: the nvidia-smi stand-in runs this under a plain Debian python3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from console.domain.values import GpuProcess, GpuSample, GpuSnapshot
from console.hosts.procfs import pid_alive

LEDGER_ENV = "SERVE_CONSOLE_SIM_LEDGER"
DEFAULT_LEDGER_DIR = "/var/lib/serve-console-sim/ledger"
INVENTORY_FILE = "gpus.json"
DEFAULT_GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

# PCI buses of the eight GPU slots of a typical dual-socket 8-GPU server; nvidia-smi numbers GPUs in
# this (PCI) order, while CUDA may number them differently unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
_PCI_BUSES = (0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF)


@dataclass(frozen=True, slots=True)
class InventoryGpu:
    """One simulated card as the inventory lists it."""

    index: int
    uuid: str
    name: str
    total_mib: int
    pci_bus_id: str


@dataclass(frozen=True, slots=True)
class ProcRecord:
    """One live engine's holdings, read from its `proc-<pid>.json`."""

    pid: int
    name: str
    used_mib: dict[int, int]
    util_pct: dict[int, int]
    power_w: dict[int, float] = field(default_factory=dict)
    """The draw an engine set for a GPU (a stall's spinning or idle card); unset: follows utilisation."""


def ledger_dir_from_env() -> Path:
    """The ledger directory: `$SERVE_CONSOLE_SIM_LEDGER`, else the system default."""
    return Path(os.environ.get(LEDGER_ENV) or DEFAULT_LEDGER_DIR)


def gpu_uuid(host: str, index: int) -> str:
    """A stable, well-formed GPU UUID derived from the host name and the card's index."""
    digest = hashlib.sha1(f"{host}:{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def pci_bus_id(index: int) -> str:
    """The nvidia-smi style bus id of slot `index` (`00000000:1B:00.0`)."""
    if index < len(_PCI_BUSES):
        bus = _PCI_BUSES[index]
    else:  # more cards than a standard chassis: keep counting upwards past the last slot
        bus = (_PCI_BUSES[-1] + 0x10 * (index - len(_PCI_BUSES) + 1)) % 0x100
    return f"00000000:{bus:02X}:00.0"


def _write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, path)


def ensure_inventory(
    directory: str | Path,
    count: int,
    total_mib: int,
    name: str = DEFAULT_GPU_NAME,
    *,
    host: str | None = None,
) -> list[InventoryGpu]:
    """Create (or correct) `gpus.json` for `count` identical cards and return the inventory.

    An existing inventory with the same shape is kept as is, so the UUIDs stay stable across runs.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    current = read_inventory(path)
    if (
        len(current) == count
        and all(g.total_mib == total_mib and g.name == name for g in current)
    ):
        return current
    host = host or socket.gethostname()
    gpus = [
        InventoryGpu(i, gpu_uuid(host, i), name, total_mib, pci_bus_id(i)) for i in range(count)
    ]
    _write_json_atomic(path / INVENTORY_FILE, {"gpus": [asdict(g) for g in gpus]})
    return gpus


def read_inventory(directory: str | Path) -> list[InventoryGpu]:
    """The inventory, or an empty list when there is none (or it is unreadable)."""
    try:
        doc = json.loads((Path(directory) / INVENTORY_FILE).read_text(encoding="utf-8"))
        return [
            InventoryGpu(int(g["index"]), str(g["uuid"]), str(g["name"]), int(g["total_mib"]),
                         str(g["pci_bus_id"]))
            for g in doc["gpus"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _int_map(raw: object) -> dict[int, int]:
    if not isinstance(raw, dict):
        return {}
    return {int(k): int(v) for k, v in raw.items()}


def read_processes(directory: str | Path) -> list[ProcRecord]:
    """Live engines' records, sorted by pid; stale and malformed files are skipped."""
    records = []
    for path in Path(directory).glob("proc-*.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            record = ProcRecord(int(doc["pid"]), str(doc.get("name") or "python3"),
                                _int_map(doc.get("used_mib")), _int_map(doc.get("util_pct")),
                                {int(k): float(v) for k, v in (doc.get("power_w") or {}).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if pid_alive(record.pid):
            records.append(record)
    return sorted(records, key=lambda r: r.pid)


def power_w(index: int, util_pct: int) -> float:
    """The draw nvidia-smi shows for a card at this utilisation: ~38 W idle, ~560 W flat out."""
    return round(38.0 + util_pct * 5.2 + index * 0.37, 2)


def temperature_c(index: int, util_pct: int) -> int:
    """A plausible die temperature: ~32 C idle (cards differ by a degree or two), ~70 C flat out."""
    return 31 + (index * 7) % 4 + round(util_pct * 0.38)


def read_snapshot(directory: str | Path) -> GpuSnapshot:
    """All GPUs of the simulated host with the memory the live engines hold."""
    now = time.time()
    inventory = read_inventory(directory)
    if not inventory:
        return GpuSnapshot(taken_at=now, error=f"no GPU inventory in {directory}")
    procs = read_processes(directory)
    by_index = {g.index: g for g in inventory}
    used = {g.index: 0 for g in inventory}
    util = {g.index: 0 for g in inventory}
    power: dict[int, float] = {}
    processes = []
    for rec in procs:
        for idx, mib in sorted(rec.used_mib.items()):
            if idx not in by_index or mib <= 0:
                continue
            used[idx] += mib
            util[idx] = max(util[idx], rec.util_pct.get(idx, 0))
            if idx in rec.power_w:
                power[idx] = max(power.get(idx, 0.0), rec.power_w[idx])
            processes.append(GpuProcess(pid=rec.pid, gpu_uuid=by_index[idx].uuid, gpu_index=idx,
                                        used_mib=mib, name=rec.name))
    gpus = tuple(
        GpuSample(index=g.index, uuid=g.uuid, name=g.name, total_mib=g.total_mib,
                  used_mib=min(used[g.index], g.total_mib), util_pct=min(util[g.index], 100),
                  temp_c=temperature_c(g.index, util[g.index]), pci_bus_id=g.pci_bus_id,
                  power_w=power.get(g.index, power_w(g.index, min(util[g.index], 100))))
        for g in inventory
    )
    return GpuSnapshot(taken_at=now, gpus=gpus, processes=tuple(processes))


class ProcLedger:
    """One engine's `proc-<pid>.json`: what it holds per GPU, written atomically on `flush`."""

    def __init__(self, directory: str | Path, *, pid: int | None = None, name: str = "python3") -> None:
        self.directory = Path(directory)
        self.pid = os.getpid() if pid is None else pid
        self.name = name
        self.path = self.directory / f"proc-{self.pid}.json"
        self.used_mib: dict[int, int] = {}
        self.util_pct: dict[int, int] = {}
        self.power_w: dict[int, float] = {}
        self._written: tuple[dict[int, int], dict[int, int], dict[int, float]] | None = None

    def set(self, gpu: int, *, used_mib: int | None = None, util_pct: int | None = None,
            power_w: float | None = None) -> None:
        """Record a GPU's holding, utilisation and/or draw (written on the next `flush`)."""
        if power_w is not None:
            self.power_w[gpu] = float(power_w)
        if used_mib is not None:
            self.used_mib[gpu] = max(0, int(used_mib))
        if util_pct is not None:
            self.util_pct[gpu] = max(0, min(100, int(util_pct)))

    def flush(self) -> None:
        """Write the file if anything changed since the last write."""
        state = (dict(self.used_mib), dict(self.util_pct), dict(self.power_w))
        if state == self._written:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(self.path, {
            "pid": self.pid,
            "name": self.name,
            "used_mib": {str(k): v for k, v in sorted(self.used_mib.items())},
            "util_pct": {str(k): v for k, v in sorted(self.util_pct.items())},
            **({"power_w": {str(k): v for k, v in sorted(self.power_w.items())}} if self.power_w else {}),
            "updated_at": time.time(),
        })
        self._written = state

    def remove(self) -> None:
        """Free everything: delete the file (idempotent)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._written = None
