"""GPU samples of the machine the console runs on, through NVML (`pynvml` from nvidia-ml-py).

NVML calls block briefly, so they run in a worker thread. Where there is no driver (a laptop, CI),
every snapshot says so in `error` instead of raising.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import ModuleType
from typing import Any

from console.domain.safe_text import printable
from console.domain.values import GpuProcess, GpuSample, GpuSnapshot
from console.hosts.base import SampledGpuSource

_NO_DRIVER = ("LibraryNotFound", "DriverNotLoaded")


def _text(value: Any) -> str:
    """A driver string as shown: decoded, and printable like all host text."""
    return printable(value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))


def _describe_nvml_error(exc: BaseException) -> str:
    kind = type(exc).__name__.removeprefix("NVMLError_")
    detail = str(exc).strip() or kind
    if kind in _NO_DRIVER:
        return f"NVML: no NVIDIA driver on this machine ({detail})"
    if kind == "NoPermission":
        return f"NVML: no permission to read the GPUs ({detail})"
    return f"NVML: {detail}"


class NvmlSource(SampledGpuSource):
    """GpuSource for the local machine via NVML."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml  # injectable for tests; imported lazily otherwise
        self._init_lock = threading.Lock()
        self._initialised = False

    def _module(self) -> ModuleType:
        if self._nvml is None:
            import pynvml

            self._nvml = pynvml
        return self._nvml

    def _ensure_init(self, nvml: ModuleType) -> None:
        with self._init_lock:
            if not self._initialised:
                nvml.nvmlInit()
                self._initialised = True

    def _sample_blocking(self) -> GpuSnapshot:
        now = time.time()
        try:
            nvml = self._module()
        except ImportError as exc:
            return GpuSnapshot(taken_at=now, error=f"NVML: pynvml is not installed ({exc})")
        try:
            self._ensure_init(nvml)
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            return GpuSnapshot(taken_at=now, error=_describe_nvml_error(exc))
        gpus: list[GpuSample] = []
        procs: list[GpuProcess] = []
        errors: list[str] = []
        for index in range(count):
            try:
                gpu, gpu_procs = self._one_gpu(nvml, index)
            except nvml.NVMLError as exc:
                errors.append(f"GPU {index}: {_describe_nvml_error(exc)}")
                continue
            gpus.append(gpu)
            procs.extend(gpu_procs)
        return GpuSnapshot(
            taken_at=now, gpus=tuple(gpus), processes=tuple(procs), error="; ".join(errors) or None
        )

    @staticmethod
    def _optional(call: Any, *args: Any) -> Any:
        # Fields a GPU does not support ([Not Supported] in nvidia-smi) raise; they become None.
        try:
            return call(*args)
        except Exception:
            return None

    def _one_gpu(self, nvml: ModuleType, index: int) -> tuple[GpuSample, list[GpuProcess]]:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        mem = self._optional(nvml.nvmlDeviceGetMemoryInfo, handle)
        util = self._optional(nvml.nvmlDeviceGetUtilizationRates, handle)
        temp = self._optional(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        pci = self._optional(nvml.nvmlDeviceGetPciInfo, handle)
        uuid = self._optional(nvml.nvmlDeviceGetUUID, handle)
        name = self._optional(nvml.nvmlDeviceGetName, handle)
        bus_id = getattr(pci, "busId", None) if pci is not None else None
        gpu = GpuSample(
            index=index,
            uuid=_text(uuid) if uuid is not None else None,
            name=_text(name) if name is not None else None,
            total_mib=int(mem.total) // (1 << 20) if mem is not None else None,
            used_mib=int(mem.used) // (1 << 20) if mem is not None else None,
            util_pct=int(util.gpu) if util is not None else None,
            temp_c=int(temp) if temp is not None else None,
            pci_bus_id=_text(bus_id) if bus_id is not None else None,
        )
        running = self._optional(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
        procs = [
            GpuProcess(
                pid=int(p.pid),
                gpu_uuid=gpu.uuid,
                gpu_index=index,
                used_mib=int(p.usedGpuMemory) // (1 << 20) if getattr(p, "usedGpuMemory", None) else None,
            )
            for p in running
        ]
        return gpu, procs

    async def sample(self) -> GpuSnapshot:
        return await asyncio.to_thread(self._sample_blocking)

    async def close(self) -> None:
        if self._initialised and self._nvml is not None:
            try:
                await asyncio.to_thread(self._nvml.nvmlShutdown)
            except Exception:
                pass
            self._initialised = False
