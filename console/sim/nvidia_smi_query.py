"""`nvidia-smi -q [-d PERFORMANCE,POWER,CLOCK,...]` of the simulated GPUs: nvidia-smi's text report.

The shape is the real one's (driver 550, leptonai/gpud `e2e/mock/nvidia-smi/test_data.go`, a real A10's
`nvidia-smi -q`): the `==============NVSMI LOG==============` banner, `Timestamp`, `Driver Version`,
`CUDA Version`, `Attached GPUs`, then one block per GPU headed by its bus id, each label padded to column
42 and each nested level four more spaces in. Only the display groups the console reads are served:
PERFORMANCE (Performance State, Clocks Event Reasons), POWER (GPU, GPU Memory and Module Power Readings)
and CLOCK (Clocks, Applications, Default Applications, Deferred, Max, Max Customer Boost, Clock Policy).

The figures follow the ledger's utilisation: a busy GPU is in P0 at a high SM clock with Idle Not Active;
an idle one in P8 at 210 MHz with Idle Active (stalls.md §4: what a spinning or an idle GPU reads).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from console.domain.values import GpuSample, GpuSnapshot

DISPLAYS = ("PERFORMANCE", "POWER", "CLOCK")
_COLUMN = 42
_MAX_SM_MHZ, _MEM_MHZ, _VIDEO_MHZ = 2430, 14001, 1965


class UnknownDisplay(ValueError):
    """A `-d` group the stand-in does not serve."""


def _row(level: int, label: str, value: str | None = None) -> str:
    text = " " * (4 * level) + label
    return text if value is None else f"{text.ljust(_COLUMN)}: {value}"


def _power_limit_w(g: GpuSample) -> float:
    return 700.0 if "H100" in (g.name or "") or "H200" in (g.name or "") else 600.0


def _busy(g: GpuSample) -> bool:
    return (g.util_pct or 0) > 0


def _performance(g: GpuSample) -> list[str]:
    reason = lambda on: "Active" if on else "Not Active"  # noqa: E731
    return [
        _row(1, "Performance State", "P0" if _busy(g) or (g.used_mib or 0) > 0 else "P8"),
        _row(1, "Clocks Event Reasons"),
        _row(2, "Idle", reason(not _busy(g))),
        _row(2, "Applications Clocks Setting", "Not Active"),
        _row(2, "SW Power Cap", "Not Active"),
        _row(2, "HW Slowdown", "Not Active"),
        _row(3, "HW Thermal Slowdown", "Not Active"),
        _row(3, "HW Power Brake Slowdown", "Not Active"),
        _row(2, "Sync Boost", "Not Active"),
        _row(2, "SW Thermal Slowdown", "Not Active"),
        _row(2, "Display Clock Setting", "Not Active"),
    ]


def _power(g: GpuSample, draw_w: float) -> list[str]:
    limit = f"{_power_limit_w(g):.2f} W"
    return [
        _row(1, "GPU Power Readings"),
        _row(2, "Power Draw", f"{draw_w:.2f} W"),
        _row(2, "Current Power Limit", limit),
        _row(2, "Requested Power Limit", limit),
        _row(2, "Default Power Limit", limit),
        _row(2, "Min Power Limit", "150.00 W"),
        _row(2, "Max Power Limit", limit),
        _row(1, "GPU Memory Power Readings"),
        _row(2, "Power Draw", "N/A"),
        _row(1, "Module Power Readings"),
        *(_row(2, name, "N/A") for name in ("Power Draw", "Current Power Limit", "Requested Power Limit",
                                            "Default Power Limit", "Min Power Limit", "Max Power Limit")),
    ]


def _clocks(g: GpuSample) -> list[str]:
    sm = f"{_MAX_SM_MHZ - 45 if _busy(g) else 210} MHz"
    mem = f"{_MEM_MHZ if _busy(g) else 405} MHz"
    return [
        _row(1, "Clocks"),
        _row(2, "Graphics", sm), _row(2, "SM", sm), _row(2, "Memory", mem),
        _row(2, "Video", f"{_VIDEO_MHZ if _busy(g) else 555} MHz"),
        _row(1, "Applications Clocks"),
        _row(2, "Graphics", f"{_MAX_SM_MHZ} MHz"), _row(2, "Memory", f"{_MEM_MHZ} MHz"),
        _row(1, "Default Applications Clocks"),
        _row(2, "Graphics", f"{_MAX_SM_MHZ} MHz"), _row(2, "Memory", f"{_MEM_MHZ} MHz"),
        _row(1, "Deferred Clocks"),
        _row(2, "Memory", "N/A"),
        _row(1, "Max Clocks"),
        _row(2, "Graphics", f"{_MAX_SM_MHZ} MHz"), _row(2, "SM", f"{_MAX_SM_MHZ} MHz"),
        _row(2, "Memory", f"{_MEM_MHZ} MHz"), _row(2, "Video", f"{_VIDEO_MHZ} MHz"),
        _row(1, "Max Customer Boost Clocks"),
        _row(2, "Graphics", f"{_MAX_SM_MHZ} MHz"),
        _row(1, "Clock Policy"),
        _row(2, "Auto Boost", "N/A"), _row(2, "Auto Boost Default", "N/A"),
    ]


def displays_of(spec: str | None) -> tuple[str, ...]:
    """The `-d` groups asked for (all served ones without `-d`).

    Raises:
        UnknownDisplay: a group nvidia-smi has that the stand-in does not serve, or one it does not have.
    """
    if not spec:
        return DISPLAYS
    asked = tuple(part.strip().upper() for part in spec.split(",") if part.strip())
    for name in asked:
        if name not in DISPLAYS:
            raise UnknownDisplay(name)
    return asked


def query_lines(snapshot: GpuSnapshot, displays: Sequence[str], gpus: Sequence[GpuSample], *, driver: str,
                cuda: str, power_w) -> list[str]:  # type: ignore[no-untyped-def]
    """The report's lines; `power_w(gpu)` gives a GPU's draw as the CSV query reports it."""
    stamp = time.strftime("%a %b %e %H:%M:%S %Y", time.localtime())
    out = ["", "==============NVSMI LOG==============", "", _row(0, "Timestamp", stamp),
           _row(0, "Driver Version", driver), _row(0, "CUDA Version", cuda), "",
           _row(0, "Attached GPUs", str(len(snapshot.gpus)))]
    for g in gpus:
        out.append(f"GPU {g.pci_bus_id or f'00000000:{g.index:02X}:00.0'}")
        if "PERFORMANCE" in displays:
            out += _performance(g)
        if "POWER" in displays:
            out += _power(g, float(power_w(g)))
        if "CLOCK" in displays:
            out += _clocks(g)
        out.append("")
    return out
