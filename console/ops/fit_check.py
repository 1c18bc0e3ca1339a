"""Fit of a service's layouts on its host: the switch's preflight and the layout picker's column.

The model comes from the service's `model_config`; the GPUs' capacity from a live GPU sample when one is at
hand (PyTorch's view of nvidia-smi's MiB), else from hosts.toml (`gpu_mem_gib`, `gpu_count`, or the
simulated host's cards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.config import HostConfig, LayoutConfig, ServiceConfig
from console.domain.values import GpuSnapshot

if TYPE_CHECKING:
    from console.domain.fit import FitResult
    from console.hosts.base import Host


@dataclass(frozen=True, slots=True)
class GpuCapacity:
    """Per-GPU capacity as PyTorch reports it, and the number of GPUs."""

    gpu_mem_gib: float
    gpu_count: int | None
    source: str
    """Where the numbers came from: "sample", "config" or "sim"."""


def gpu_capacity(cfg: HostConfig, snapshot: GpuSnapshot | None = None) -> GpuCapacity | None:
    """The host's GPU capacity, or None when neither a sample nor the config says."""
    from console.domain.fit import torch_capacity_bytes

    totals = [g.total_mib for g in (snapshot.gpus if snapshot else ()) if g.total_mib]
    if totals:
        return GpuCapacity(torch_capacity_bytes(min(totals)) / 2**30, len(totals), "sample")
    if cfg.gpu_mem_gib:
        return GpuCapacity(cfg.gpu_mem_gib, cfg.gpu_count, "config")
    if cfg.sim is not None:
        return GpuCapacity(torch_capacity_bytes(cfg.sim.gpu_total_mib) / 2**30, cfg.sim.gpu_count, "sim")
    return None


def fit_layout(
    service: ServiceConfig, layout: LayoutConfig, capacity: GpuCapacity | None
) -> FitResult | None:
    """The predicted fit of one layout, or None when the model or the GPUs are unknown.

    Raises:
        UsageError: the service's model config cannot be read (names the file).
    """
    if service.model_config is None or capacity is None:
        return None
    from console.domain.fit import load_model_spec, predict_fit

    spec = load_model_spec(service.model_config)
    return predict_fit(
        spec,
        layout.layout,
        service.engine,
        gpu_mem_gib=capacity.gpu_mem_gib,
        # a layout over N nodes has N hosts' GPUs (the loader checked each node has its share); each
        # GPU is taken to be the head's kind, as the engines assume one kind across nodes
        gpu_count=capacity.gpu_count * layout.nodes if capacity.gpu_count is not None else None,
        mem_fraction=service.mem_fraction,
    )


def layouts_that_fit(service: ServiceConfig, capacity: GpuCapacity | None, *, exclude: str) -> list[str]:
    """The service's layouts predicted to start (fits or tight), but `exclude`, in the config's order."""
    fits = ((lc, fit_layout(service, lc, capacity)) for lc in service.layouts if lc.name != exclude)
    return [lc.name for lc, fit in fits if fit is not None and fit.starts]


async def host_capacity(host: Host) -> GpuCapacity | None:
    """Capacity from a fresh GPU sample of the host, falling back to the config."""
    snapshot = None
    try:
        snapshot = await host.gpus.sample()
    except Exception:  # an unreadable GPU source falls back to the config, never breaks the preflight
        snapshot = None
    return gpu_capacity(host.config, snapshot)


async def fit_service_layouts(
    host: Host, service: ServiceConfig
) -> list[tuple[LayoutConfig, FitResult | None]]:
    """Every layout of a service with its predicted fit (None where it cannot be predicted)."""
    capacity = await host_capacity(host)
    return [(lc, fit_layout(service, lc, capacity)) for lc in service.layouts]
