"""The work behind `serve-console predict`: read the inputs, calibrate, predict, order."""

from __future__ import annotations

import argparse
import json
from typing import Any

from console.commands.predict import _concurrencies, _positive, parse_measured
from console.domain.fit import load_model_spec, predict_fit, read_model_config_bytes, torch_capacity_bytes
from console.domain.layout import Layout, LayoutError, parse_layout
from console.domain.perf import (
    Coefficients,
    HostShape,
    Observation,
    Workload,
    calibrate,
    default_interconnect,
    gpu_kind,
    layout_kind,
    layout_terms,
    perf_model,
    predict,
)
from console.domain.sizes import GIB
from console.errors import UsageError


def _layout(text: str, flag: str) -> Layout:
    try:
        return parse_layout(text)
    except LayoutError as exc:
        raise UsageError(f"{flag} {text!r}: {exc}") from None


def _by_hand(args: argparse.Namespace) -> tuple[Any, HostShape, list[Layout], list[str], str, list[Any]]:
    """The model, GPUs and layouts given on the command line."""
    for flag, value in (("--model-config", args.model_config), ("--gpu", args.gpu), ("--gpus", args.gpus),
                        ("--layout", args.layout)):  # fmt: skip
        if value is None:
            raise UsageError(f"predict: {flag} is required without --host")
    gpus = _positive("--gpus", args.gpus)
    nodes = _positive("--nodes", args.nodes)
    gpu = gpu_kind(args.gpu)
    layouts = [_layout(text, "--layout") for text in args.layout]
    host = HostShape(
        gpu=gpu, gpus_per_node=gpus, nodes=nodes, interconnect=args.interconnect or default_interconnect(gpu)
    )
    return args.model_config, host, layouts, [lay.name for lay in layouts], args.engine or "sglang", []


def predict_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One JSON-ready row per (layout, concurrency), fastest first within each concurrency."""
    _positive("--input-len", args.input_len)
    _positive("--output-len", args.output_len)
    concurrencies = _concurrencies(args.concurrency)
    if args.host is not None:
        from console.commands.predict_host import from_host

        model_config, host, layouts, names, engine, history = from_host(args)
    else:
        model_config, host, layouts, names, engine, history = _by_hand(args)
    args.engine = engine
    gpus, nodes, gpu = host.gpus_per_node, host.nodes, host.gpu
    spec = load_model_spec(model_config)
    config = json.loads(read_model_config_bytes(_config_file(str(model_config))).decode("utf-8"))
    model = perf_model(spec, config, args.precision)
    work = {c: Workload(args.input_len, args.output_len, c) for c in concurrencies}
    observations = list(history)
    for text in args.measured:
        layout_text, conc, metric, value = parse_measured(text)
        layout = _layout(layout_text, "--measured")
        terms = layout_terms(
            model, layout, args.engine, host, Workload(args.input_len, args.output_len, conc)
        )
        observations.append(Observation(terms, metric, value, layout_kind(layout)))
    fit = calibrate(Coefficients(), observations)
    gpu_mem_gib = torch_capacity_bytes(gpu.memory_mib) / GIB
    rows: list[dict[str, Any]] = []
    for c in concurrencies:
        ranked, refused = [], []
        for layout, name in zip(layouts, names, strict=True):
            verdict = predict_fit(spec, layout, args.engine, gpu_mem_gib=gpu_mem_gib, gpu_count=gpus * nodes)
            base = {"layout": name, "concurrency": c, "verdict": verdict.verdict}
            if not verdict.starts:
                refused.append({**base, **_empty(), "calibrated": fit.calibrated, "reason": verdict.reason})
                continue
            terms = layout_terms(model, layout, args.engine, host, work[c])
            band = fit.band_for(layout_kind(layout))
            speed = predict(terms, name, fit.coefficients, band=band, calibrated=fit.calibrated)
            ranked.append({**speed.to_json(), "verdict": verdict.verdict})
        ranked.sort(key=lambda row: -row["output_tok_s"])
        rows += ranked + refused
    return rows


def _config_file(path: str) -> Any:
    from pathlib import Path

    file = Path(path)
    return file / "config.json" if file.is_dir() else file


def _empty() -> dict[str, Any]:
    return {
        "ttft_ms": None,
        "tpot_ms": None,
        "output_tok_s": None,
        "per_request_tok_s": None,
        "range": None,
    }
