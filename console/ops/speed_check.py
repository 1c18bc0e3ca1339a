"""Predicted speed of a service's layouts on its host: the picker's columns, explore's order and pruning,
and `predict --host`.

The GPUs come from a live sample (nvidia-smi's name and count) or the simulated host's cards; the link
between them is NVLink for SXM/OAM parts and PCIe without P2P otherwise, unless said. Calibration comes
from the host's own history: every stored probe level of the service is an observation (its TPOT and
its aggregate tok/s at its concurrency and lengths).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.config import HostConfig, LayoutConfig, ServiceConfig
from console.domain.values import Engine, GpuSnapshot

if TYPE_CHECKING:
    from console.domain.perf import Calibration, HostShape, Observation, PerfModel, SpeedPrediction
    from console.hosts.base import Host
    from console.ops.explore import ResultsStore

#: The high concurrency of the picker's second column.
HIGH_CONCURRENCY = 64
#: Calibration reads the newest this many stored probe levels (each costs a layout's terms, ~20 ms).
HISTORY_LEVELS = 64


@dataclass(frozen=True, slots=True)
class SpeedContext:
    """What predicting a service's layouts on a host needs, once."""

    model: PerfModel
    shape: HostShape
    engine: Engine
    fingerprint: dict[str, Any]
    """GPU name and count, engine (and versions where the host shows them): each receipt carries it."""


def host_shape(
    cfg: HostConfig, snapshot: GpuSnapshot | None, interconnect: str | None = None
) -> HostShape | None:
    """The host's GPUs for the performance model, or None when no GPU name is known.

    Raises:
        UsageError: the GPU is not in the hardware table (the message names the file).
    """
    from console.domain.perf import HostShape, default_interconnect, gpu_kind

    names = [g.name for g in (snapshot.gpus if snapshot else ()) if g.name]
    if names:
        name, count = names[0], len(names)
    elif cfg.sim is not None:
        name, count = cfg.sim.gpu_name, cfg.sim.gpu_count
    else:
        return None
    gpu = gpu_kind(name)
    return HostShape(
        gpu=gpu, gpus_per_node=count, nodes=1, interconnect=interconnect or default_interconnect(gpu)
    )


def speed_context(
    cfg: HostConfig, service: ServiceConfig, snapshot: GpuSnapshot | None, interconnect: str | None = None
) -> SpeedContext | None:
    """The context for a service on a host, or None without a model config or a known GPU name."""
    if service.model_config is None:
        return None
    shape = host_shape(cfg, snapshot, interconnect)
    if shape is None:
        return None
    from console.domain.fit import load_model_spec, read_model_config_bytes
    from console.domain.perf import perf_model

    spec = load_model_spec(service.model_config)
    config = json.loads(read_model_config_bytes(service.model_config).decode("utf-8"))
    fingerprint = {
        "gpu": shape.gpu.names[0] if shape.gpu.names else shape.gpu.key,
        "gpus": shape.gpus_per_node,
        "interconnect": shape.interconnect,
        "engine": service.engine.value,
        "engine_version": None,
        "driver": None,
        "nccl": None,
    }
    return SpeedContext(perf_model(spec, config), shape, service.engine, fingerprint)


def observations(ctx: SpeedContext, service: ServiceConfig, probes: Iterable[Any]) -> list[Observation]:
    """Observations from stored probe levels (StoredProbe rows) of layouts the service still has."""
    from console.domain.perf import Observation, Workload, layout_kind, layout_terms

    out: list[Observation] = []
    for probe in probes:
        lc = service.layout(probe.layout) if probe.layout else None
        line, params = probe.result, probe.params
        conc = line.get("concurrency")
        if lc is None or line.get("outcome") != "measured" or not isinstance(conc, int) or conc < 1:
            continue
        # Fewer prompts than the level's concurrency keep fewer in flight: the mean is what was measured.
        mean = line.get("mean_concurrency")
        conc = max(1, round(mean)) if isinstance(mean, int | float) and 0 < mean < conc else conc
        work = Workload(int(params.get("input_len", 256)), int(params.get("output_len", 128)), conc)
        terms = layout_terms(ctx.model, lc.layout, ctx.engine, ctx.shape, work)
        for metric, key in (("tpot_ms", "mean_tpot_ms"), ("output_tok_s", "output_throughput")):
            value = line.get(key)
            if isinstance(value, int | float) and value > 0:
                out.append(Observation(terms, metric, float(value), layout_kind(lc.layout)))
    return out


def history_calibration(
    ctx: SpeedContext, service: ServiceConfig, host_name: str, store: ResultsStore | None
) -> Calibration:
    """Coefficients fitted to every stored probe level of this service on this host."""
    from console.domain.perf import Coefficients, calibrate

    probes = store.probes(host=host_name, service=service.name) if store is not None else []
    return calibrate(Coefficients(), observations(ctx, service, probes[-HISTORY_LEVELS:]))


def predict_layout(
    ctx: SpeedContext,
    layout: LayoutConfig,
    concurrency: int,
    calibration: Calibration,
    *,
    input_len: int = 256,
    output_len: int = 128,
) -> SpeedPrediction:
    """One layout's predicted speed at one concurrency."""
    from console.domain.perf import Workload, layout_kind, layout_terms, predict

    terms = layout_terms(
        ctx.model, layout.layout, ctx.engine, ctx.shape, Workload(input_len, output_len, concurrency)
    )
    band = calibration.band_for(layout_kind(layout.layout))
    return predict(terms, layout.name, calibration.coefficients, band=band, calibrated=calibration.calibrated)


async def host_speed_context(
    host: Host, service: ServiceConfig, interconnect: str | None = None
) -> SpeedContext | None:
    """The context from a fresh GPU sample of the host, falling back to the config."""
    snapshot = None
    try:
        snapshot = await host.gpus.sample()
    except Exception:  # an unreadable GPU source falls back to the config, never breaks the caller
        snapshot = None
    return speed_context(host.config, service, snapshot, interconnect)
