"""`predict --host`: the model, engine, GPUs and layouts from hosts.toml, the calibration from the store."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from console.commands.host_args import pick_target
from console.domain.layout import Layout
from console.errors import UsageError


def from_host(args: argparse.Namespace) -> tuple[Any, Any, list[Layout], list[str], str, list[Any]]:
    """(model config, host shape, layouts, their names, engine, observations from the host's history).

    Raises:
        UsageError: the service has no model_config, the GPUs cannot be named, a layout is not the service's.
    """
    _config, host_cfg, service = pick_target(args)
    if service.model_config is None:
        raise UsageError(f"{host_cfg.name}/{service.name}: no model_config in hosts.toml: predict needs one")
    if args.gpu is not None:  # said by hand: no sample needed (a host that cannot be reached now)
        from console.domain.values import GpuSample, GpuSnapshot
        from console.ops.speed_check import speed_context

        count = args.gpus or host_cfg.gpu_count
        if not count or count < 1:
            raise UsageError(f"{host_cfg.name}: give --gpus with --gpu (hosts.toml has no gpu_count)")
        snapshot = GpuSnapshot(0.0, tuple(GpuSample(index=i, name=args.gpu) for i in range(count)))
        ctx = speed_context(host_cfg, service, snapshot, args.interconnect)
    else:
        ctx = asyncio.run(_context(host_cfg, service, args.interconnect))
    if ctx is None:
        raise UsageError(f"{host_cfg.name}: no GPU name from a sample or the config: give --gpu and --gpus")
    picked = []
    for text in args.layout or [lc.name for lc in service.layouts]:
        lc = service.layout(text)
        if lc is None:
            known = ", ".join(lc.name for lc in service.layouts)
            raise UsageError(f"{host_cfg.name}/{service.name}: no layout {text!r} (layouts: {known})")
        picked.append(lc)
    history = _history(ctx, service, host_cfg.name)
    return (service.model_config, ctx.shape, [lc.layout for lc in picked], [lc.name for lc in picked],
            service.engine.value, history)  # fmt: skip


async def _context(host_cfg: Any, service: Any, interconnect: str | None) -> Any:
    from console.ops.speed_check import host_speed_context, speed_context

    if host_cfg.sim is not None:  # the simulated host's cards are in its config: nothing to start
        return speed_context(host_cfg, service, None, interconnect)
    from console.factory import open_host

    host = open_host(host_cfg)
    try:
        return await host_speed_context(host, service, interconnect)
    finally:
        await host.close()


def _history(ctx: Any, service: Any, host_name: str) -> list[Any]:
    from console.ops.audit import open_audit
    from console.ops.explore import ResultsStore
    from console.ops.speed_check import observations

    audit = open_audit()
    store = ResultsStore.beside(audit)
    try:
        return observations(ctx, service, store.probes(host=host_name, service=service.name))
    finally:
        store.close()
        audit.close()
