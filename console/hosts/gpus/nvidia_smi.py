"""GPU samples from `nvidia-smi` over a Transport (one snapshot, or a stream from one long-lived
`nvidia-smi -lms` channel), memory history for sparklines, and the CUDA-order to nvidia-smi-order
mapping for OOM messages. Reading the CSV itself lives in nvidia_smi_csv.py; its names stay
importable from here."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence

from console.domain.safe_text import printable
from console.domain.values import GpuProcess, GpuSample, GpuSnapshot
from console.errors import HostError
from console.hosts.argv import CommandFailed, TransportLost, last_line
from console.hosts.base import Transport
from console.hosts.gpus.nvidia_smi_csv import (
    APP_FIELDS,
    GPU_FIELDS,
    QUERY_APPS,
    QUERY_GPU,
    csv_rows,
    garbage_note,
    parse_apps,
    parse_gpu_line,
    parse_gpus,
)
from console.hosts.gpus.nvml import NvmlSource

# The CSV names are re-exported: callers (bench/fanout.py, the parser tests) import them from here.
__all__ = [
    "APP_FIELDS",
    "GPU_FIELDS",
    "QUERY_APPS",
    "QUERY_GPU",
    "GpuHistory",
    "NvidiaSmiSource",
    "NvmlSource",
    "map_cuda_index",
    "parse_apps",
    "parse_gpu_line",
    "parse_gpus",
]


def _join_errors(*errors: str | None) -> str | None:
    found = [e for e in errors if e]
    return "; ".join(found) if found else None


def _failure(host: str, exc: Exception) -> str:
    if isinstance(exc, CommandFailed):
        detail = last_line(exc.result.stderr) or last_line(exc.result.stdout)
        if exc.result.exit_status == 127:
            return f"nvidia-smi not found on {host}"
        return printable(f"nvidia-smi failed on {host}: {detail or f'exit status {exc.result.exit_status}'}")
    return printable(str(exc))


class NvidiaSmiSource:
    """GpuSource reading nvidia-smi CSV over the host's transport."""

    def __init__(self, transport: Transport, *, apps_every_s: float = 2.0) -> None:
        self.transport = transport
        self.apps_every_s = apps_every_s

    async def _run(self, argv: list[str]) -> str:
        result = await self.transport.run(argv, timeout_s=30.0)
        if not result.ok:
            raise CommandFailed(self.transport.name, result)
        return result.stdout

    async def _apps(self, gpus: Sequence[GpuSample]) -> tuple[list[GpuProcess], str | None]:
        try:
            return parse_apps(await self._run(QUERY_APPS), gpus)
        except (CommandFailed, HostError) as exc:
            return [], _failure(self.transport.name, exc)

    async def sample(self) -> GpuSnapshot:
        """One snapshot: GPUs and their compute processes (two short commands, run concurrently)."""
        gpu_out, apps_out = await asyncio.gather(
            self._run(QUERY_GPU), self._run(QUERY_APPS), return_exceptions=True
        )
        now = time.time()
        if isinstance(gpu_out, BaseException):
            if not isinstance(gpu_out, Exception):
                raise gpu_out
            return GpuSnapshot(taken_at=now, error=_failure(self.transport.name, gpu_out))
        gpus, gpu_note = parse_gpus(gpu_out)
        if isinstance(apps_out, Exception):
            procs, apps_note = [], _failure(self.transport.name, apps_out)
        else:
            procs, apps_note = parse_apps(str(apps_out), gpus)
        return GpuSnapshot(
            taken_at=now, gpus=tuple(gpus), processes=tuple(procs), error=_join_errors(gpu_note, apps_note)
        )

    async def stream(self, interval_s: float) -> AsyncIterator[GpuSnapshot]:
        """Snapshots every `interval_s` from one long-lived `nvidia-smi -lms` channel; processes are
        refreshed by a short command every few seconds. Errors become snapshots with `error`, and the
        stream carries on (after a reconnect, or a pause when nvidia-smi itself fails)."""
        interval_ms = max(100, int(interval_s * 1000))
        first = await self.sample()
        yield first
        processes: tuple[GpuProcess, ...] = first.processes
        apps_note: str | None = None
        expected = len(first.gpus)
        while True:
            block: list[GpuSample] = []
            bad: list[str] = []
            last_apps = time.monotonic()
            try:
                async for line in self.transport.stream([*QUERY_GPU, "-lms", str(interval_ms)]):
                    sample = next((parse_gpu_line(r) for r in csv_rows(line)), None)
                    if sample is None:
                        bad.append(line)
                        continue
                    if block and sample.index <= block[-1].index:
                        block = []  # a new round started before the last one completed
                    block.append(sample)
                    if len(block) < max(expected, 1):
                        continue
                    expected = len(block)
                    if time.monotonic() - last_apps >= self.apps_every_s:
                        last_apps = time.monotonic()
                        procs, apps_note = await self._apps(block)
                        processes = tuple(procs)
                    yield GpuSnapshot(
                        taken_at=time.time(),
                        gpus=tuple(block),
                        processes=processes,
                        error=_join_errors(garbage_note(bad), apps_note),
                    )
                    block, bad = [], []
                yield GpuSnapshot(taken_at=time.time(), error=f"nvidia-smi on {self.transport.name} ended")
            except TransportLost as exc:
                yield GpuSnapshot(taken_at=time.time(), error=str(exc))
                continue  # stream() waits for the reconnect
            except (CommandFailed, HostError) as exc:
                yield GpuSnapshot(taken_at=time.time(), error=_failure(self.transport.name, exc))
            await asyncio.sleep(max(5.0, interval_s))


class GpuHistory:
    """A short, bounded memory history per GPU, for sparklines."""

    def __init__(self, history_s: float = 600.0, max_points: int = 600) -> None:
        self.history_s = history_s
        self._points: dict[int, deque[tuple[float, int]]] = {}
        self._max_points = max_points

    def add(self, snapshot: GpuSnapshot) -> None:
        cutoff = snapshot.taken_at - self.history_s
        for gpu in snapshot.gpus:
            if gpu.used_mib is None:
                continue
            points = self._points.setdefault(gpu.index, deque(maxlen=self._max_points))
            points.append((snapshot.taken_at, gpu.used_mib))
            while points and points[0][0] < cutoff:
                points.popleft()

    def used_mib(self, index: int) -> list[int]:
        """Memory used on GPU `index`, oldest first."""
        return [mib for _, mib in self._points.get(index, ())]

    def points(self, index: int) -> list[tuple[float, int]]:
        """(taken_at, used_mib) pairs of GPU `index`, oldest first."""
        return list(self._points.get(index, ()))

    def indices(self) -> list[int]:
        return sorted(self._points)


def _pci_key(bus_id: str | None) -> str:
    # nvidia-smi prints 00000000:41:00.0; CUDA and lspci may shorten the domain to 0000.
    if not bus_id:
        return ""
    domain, _, rest = bus_id.lower().partition(":")
    return (
        f"{int(domain, 16):08x}:{rest}"
        if rest and all(c in "0123456789abcdef" for c in domain)
        else bus_id.lower()
    )


def map_cuda_index(
    cuda_index: int, gpus: Sequence[GpuSample], environment: Mapping[str, str] | None
) -> tuple[int | None, str]:
    """Map the GPU index of a CUDA message (CUDA order) to nvidia-smi's index (PCI order).

    Returns:
        (nvidia-smi index or None, a plain explanation of how it was mapped or why it cannot be).
    """
    env = dict(environment or {})
    order = env.get("CUDA_DEVICE_ORDER", "").strip().upper()
    visible_raw = env.get("CUDA_VISIBLE_DEVICES")
    visible = [v.strip() for v in visible_raw.split(",") if v.strip()] if visible_raw else None
    if not gpus:
        return None, "mapping unknown: no GPU sample from nvidia-smi"
    if visible is not None:
        if not 0 <= cuda_index < len(visible):
            return None, f"CUDA GPU {cuda_index} is outside CUDA_VISIBLE_DEVICES={visible_raw}"
        entry = visible[cuda_index]
        if entry.upper().startswith(("GPU-", "MIG-")):
            match = next((g for g in gpus if g.uuid and g.uuid.lower() == entry.lower()), None)
            if match is None:
                return (
                    None,
                    f"mapping unknown: CUDA_VISIBLE_DEVICES names {entry}, which nvidia-smi does not list",
                )
            return (
                match.index,
                f"CUDA GPU {cuda_index} is {entry} (CUDA_VISIBLE_DEVICES), nvidia-smi GPU {match.index}",
            )
        if order != "PCI_BUS_ID":
            return None, (
                f"mapping unknown: CUDA_VISIBLE_DEVICES={visible_raw} counts in CUDA order and "
                "CUDA_DEVICE_ORDER is not PCI_BUS_ID in the unit's environment"
            )
        try:
            physical = int(entry)
        except ValueError:
            return None, f"mapping unknown: cannot read CUDA_VISIBLE_DEVICES entry {entry!r}"
        how = f"CUDA_VISIBLE_DEVICES={visible_raw} with CUDA_DEVICE_ORDER=PCI_BUS_ID"
    elif order == "PCI_BUS_ID":
        physical, how = cuda_index, "CUDA_DEVICE_ORDER=PCI_BUS_ID"
    elif len(gpus) == 1:
        return gpus[0].index, "only one GPU on the host"
    else:
        return None, (
            f"mapping unknown: CUDA's GPU {cuda_index} is in CUDA order (fastest first) and the unit's "
            "environment sets neither CUDA_DEVICE_ORDER=PCI_BUS_ID nor CUDA_VISIBLE_DEVICES by UUID, "
            f"so it may not be nvidia-smi's GPU {cuda_index}"
        )
    if any(not g.pci_bus_id for g in gpus):
        by_pci = sorted(gpus, key=lambda g: g.index)
        note = "by nvidia-smi index (no PCI bus ids in the sample)"
    else:
        by_pci = sorted(gpus, key=lambda g: _pci_key(g.pci_bus_id))
        note = "by PCI bus id"
    if not 0 <= physical < len(by_pci):
        return (
            None,
            f"mapping unknown: PCI-order GPU {physical} is not among the {len(by_pci)} GPUs nvidia-smi lists",
        )
    target = by_pci[physical]
    bus = f" ({target.pci_bus_id})" if target.pci_bus_id else ""
    return target.index, f"CUDA GPU {cuda_index} is nvidia-smi GPU {target.index}{bus}: {how}, matched {note}"
