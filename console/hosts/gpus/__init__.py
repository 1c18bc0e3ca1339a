"""GPU samples: nvidia-smi over a Transport, NVML on this machine, or dcgm-exporter.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.hosts.gpus.dcgm import DcgmSource
from console.hosts.gpus.nvidia_smi import GpuHistory, NvidiaSmiSource
from console.hosts.gpus.nvml import NvmlSource

__all__ = [
    "DcgmSource",
    "GpuHistory",
    "NvidiaSmiSource",
    "NvmlSource",
]
