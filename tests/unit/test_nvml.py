"""NvmlSource: the no-driver path for real (no GPU here), and the mapping with a stand-in module."""

from __future__ import annotations

import types

from console.hosts.gpus.nvml import NvmlSource


async def test_no_driver_gives_a_clear_snapshot_error_not_an_exception():
    snap = await NvmlSource().sample()
    if snap.gpus:  # a machine with a real GPU: the happy path ran for real
        assert snap.error is None or "NVML" in snap.error
        return
    assert snap.error is not None and snap.error.startswith("NVML: ")
    assert "no NVIDIA driver on this machine" in snap.error or "pynvml is not installed" in snap.error


class _Err(Exception):
    pass


def _fake_nvml(fail_init: type[Exception] | None = None) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = _Err
    m.NVML_TEMPERATURE_GPU = 0

    def init():
        if fail_init:
            raise fail_init("Driver Not Loaded")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: 2
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=97887 << 20, used=(1000 + h) << 20)
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50)

    def temp(h, sensor):
        raise _Err("Not Supported")

    m.nvmlDeviceGetTemperature = temp
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:{h + 1:02X}:00.0".encode())
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: (
        [types.SimpleNamespace(pid=42, usedGpuMemory=512 << 20)] if h else []
    )
    return m


async def test_samples_map_into_gpu_samples_with_unsupported_fields_as_none():
    src = NvmlSource(_fake_nvml())
    snap = await src.sample()
    assert snap.error is None and [g.index for g in snap.gpus] == [0, 1]
    g1 = snap.gpus[1]
    assert (g1.total_mib, g1.used_mib, g1.util_pct, g1.temp_c) == (97887, 1001, 50, None)
    assert g1.name == "NVIDIA H200" and g1.pci_bus_id == "00000000:02:00.0" and g1.uuid == "GPU-1"
    assert [(p.pid, p.gpu_index, p.used_mib) for p in snap.processes] == [(42, 1, 512)]
    await src.close()


async def test_driver_not_loaded_is_named():
    DriverNotLoaded = type("NVMLError_DriverNotLoaded", (_Err,), {})
    snap = await NvmlSource(_fake_nvml(DriverNotLoaded)).sample()
    assert snap.error == "NVML: no NVIDIA driver on this machine (Driver Not Loaded)"
