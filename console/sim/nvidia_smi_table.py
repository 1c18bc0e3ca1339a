"""The bare `nvidia-smi` summary table, for people who ssh into a simulated host and type it."""

from __future__ import annotations

import time

from console.domain.values import GpuSnapshot

_WIDTH = 89  # inner width of nvidia-smi's box


def power_cap_w(name: str) -> int:
    """The card's board power limit as nvidia-smi shows it (H100 SXM 700 W; the RTX PRO 6000 600 W)."""
    return 700 if "H100" in name or "H200" in name else 600


def _row(*cells: str) -> str:
    return "|" + "|".join(cells) + "|"


def render_table(snapshot: GpuSnapshot, *, driver: str, cuda: str) -> list[str]:
    """The lines of nvidia-smi's default output (GPU boxes, then the process list)."""
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(snapshot.taken_at)) + "       ",
        "+" + "-" * _WIDTH + "+",
        "| " + f"NVIDIA-SMI {driver:<22}Driver Version: {driver:<15}CUDA Version: {cuda:<9}".ljust(_WIDTH - 1)
        + "|",
        "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
        _row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ",
             " Volatile Uncorr. ECC "),
        _row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ",
             " GPU-Util  Compute M. "),
        _row(" " * 41, " " * 24, "               MIG M. "),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for g in snapshot.gpus:
        name = g.name or ""
        if len(name) > 24:
            name = name[:21] + "..."
        util = g.util_pct or 0
        perf = "P1" if util > 5 else "P8"
        watts = round(38 + util * 5.2)
        lines += [
            _row(f"   {g.index}  {name:<24}".ljust(37) + "On  ",
                 f"   {g.pci_bus_id or '':<16} Off ", f"{'0':>21} "),
            _row(f" {30 + util // 3:>2}%  {g.temp_c or 0:>3}C    {perf}".ljust(27)
                 + f"{watts:>4}W / {power_cap_w(name):>4}W ",
                 f"{g.used_mib or 0:>8}MiB / {g.total_mib or 0:>6}MiB ",
                 f"{util:>7}%      Default "),
            _row(" " * 41, " " * 24, f"{'N/A':>21} "),
            rule,
        ]
    lines += [
        " " * (_WIDTH + 2),
        "+" + "-" * _WIDTH + "+",
        "| " + "Processes:".ljust(_WIDTH - 1) + "|",
        "| " + " GPU   GI   CI              PID   Type   Process name                        GPU Memory"
        .ljust(_WIDTH - 1) + "|",
        "| " + "       ID   ID                                                               Usage"
        .ljust(_WIDTH - 1) + "|",
        "|" + "=" * _WIDTH + "|",
    ]
    if not snapshot.processes:
        lines.append("| " + " No running processes found".ljust(_WIDTH - 1) + "|")
    for p in snapshot.processes:
        cell = (f"  {p.gpu_index if p.gpu_index is not None else '-':>3}   N/A  N/A  {p.pid:>15}      C   "
                f"{(p.name or '')[:34]:<34} {p.used_mib or 0:>8}MiB")
        lines.append("| " + cell[: _WIDTH - 1].ljust(_WIDTH - 1) + "|")
    lines.append("+" + "-" * _WIDTH + "+")
    return lines
