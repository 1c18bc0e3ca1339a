"""hosts.toml and dcgm-exporter text shared by the fleet, DCGM and config tests."""

from __future__ import annotations

from pathlib import Path

from console.config import parse_config

HOST = """
[hosts.gpu-07]
{extra}
[hosts.gpu-07.services.llm]
engine = "sglang"
url = "http://127.0.0.1:30000"
mapping = "template"
template = "sglang@.service"
layouts = ["TP8"]
"""


def parse(fleet: str = "", host: str = ""):
    """A one-host hosts.toml with `fleet` before it and `host` as the host table's first line (line 3)."""
    return parse_config((fleet + HOST.format(extra=host)).encode(), "hosts.toml", base_dir=Path("."))


# Shaped like dcgm-exporter 3.x's answer with its default counters (trimmed to two GPUs).
EXPORT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 0
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 4559
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 81000
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 77000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 559
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 612.25
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 71.5
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 71
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 33
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07",err_code="79"} 79
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-07"} 1980
"""
