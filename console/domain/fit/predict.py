"""Will a model fit on the GPUs in a given layout? Per-GPU weights, overhead and KV headroom.

The prediction is made for the heaviest rank. `weights_gib_per_gpu + overhead_gib + headroom_gib`
adds up to the GPU's memory: overhead is what the engine keeps away from weights and KV cache
(CUDA context, NCCL, activations and CUDA graphs, i.e. SGLang's 1 - mem_fraction_static share or
vLLM's 1 - gpu_memory_utilization plus its profiled peak); headroom is the KV pool.

Verdicts:
- `invalid`: the engine would refuse the layout or could not shard the model that way.
- `oom`: the weights do not load (the story's `CUDA out of memory` during loading), no memory is left
  for the KV pool, or (vLLM) the pool cannot hold one request of max-model-len.
- `tight`: it starts, but the KV pool holds fewer than `TIGHT_KV_TOKENS` tokens.
- `fits`: otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from console.domain.fit.engine_memory import (
    VLLM_DEFAULT_UTILIZATION,
    EngineKnobs,
    engine_of,
    knobs_from_args,
    kv_bytes_per_token,
    sglang_default_mem_fraction,
    smi_total_mib,
    startup_overhead_bytes,
    torch_capacity_bytes,
    vllm_activation_bytes,
)
from console.domain.fit.model_spec import ModelSpec
from console.domain.fit.sharding import RankPlacement, placement, shard_problem
from console.domain.fit.weights import TensorAlloc, placement_plan, rank_load_plan
from console.domain.layout import Layout, check_layout, gpus_used
from console.domain.sizes import GIB
from console.domain.values import Engine

__all__ = [
    "TIGHT_KV_TOKENS",
    "FitResult",
    "TensorAlloc",
    "predict_fit",
    "rank_load_plan",
    "torch_capacity_bytes",
]

#: A KV pool smaller than this many tokens serves only short requests: the verdict is `tight`.
TIGHT_KV_TOKENS = 16384


@dataclass(frozen=True, slots=True)
class FitResult:
    """The fit of one model and layout on one GPU type; GiB figures are for the heaviest rank."""

    layout: str
    engine: str
    gpus_used: int
    weights_gib_per_gpu: float
    overhead_gib: float
    headroom_gib: float
    verdict: str
    reason: str
    heaviest_rank: int
    gpu_mem_gib: float = 0.0
    mem_fraction: float | None = None
    kv_tokens: int | None = None

    @property
    def starts(self) -> bool:
        """True when the engine is expected to start (fits or tight)."""
        return self.verdict in ("fits", "tight")

    def to_json(self) -> dict[str, Any]:
        """The `fit --json` object; GiB figures rounded to 2 decimals."""
        return {
            "layout": self.layout,
            "engine": self.engine,
            "gpus_used": self.gpus_used,
            "weights_gib_per_gpu": round(self.weights_gib_per_gpu, 2),
            "overhead_gib": round(self.overhead_gib, 2),
            "headroom_gib": round(self.headroom_gib, 2),
            "verdict": self.verdict,
            "reason": self.reason,
            "heaviest_rank": self.heaviest_rank,
            "gpu_mem_gib": round(self.gpu_mem_gib, 2),
            "mem_fraction": self.mem_fraction,
            "kv_tokens": self.kv_tokens,
        }


def predict_fit(
    spec: ModelSpec,
    layout: Layout,
    engine: Engine | str,
    *,
    gpu_mem_gib: float,
    gpu_count: int | None = None,
    mem_fraction: float | None = None,
) -> FitResult:
    """Predict per-GPU memory of a model in a layout under an engine.

    Args:
        spec: the model.
        layout: the parallel layout; memory flags among its extra args are honoured
            (`--mem-fraction-static`, `--gpu-memory-utilization`, `--max-model-len`, ...).
        engine: `sglang` or `vllm` (`openai` is treated like vLLM).
        gpu_mem_gib: each GPU's capacity as PyTorch reports it (94.97 for a 97887 MiB card).
        gpu_count: GPUs on the host, to refuse layouts that need more.
        mem_fraction: SGLang's `--mem-fraction-static` or vLLM's `--gpu-memory-utilization`;
            None for the engine's default.

    Returns:
        The fit, with a one-line reason.
    """
    engine_name = Engine(engine).value
    rules = engine_of(engine)
    used = gpus_used(layout, rules)
    capacity = gpu_mem_gib * GIB
    problem = check_layout(layout, rules, num_experts=spec.num_experts or None, gpu_count=gpu_count)
    problem = problem or shard_problem(spec, layout, rules)
    if problem:
        return FitResult(layout.name, engine_name, used, 0.0, 0.0, 0.0, "invalid", problem, 0, gpu_mem_gib)
    heaviest, weights = _heaviest_rank(spec, layout, rules)
    knobs = knobs_from_args(layout.extra_args)
    fraction = mem_fraction if mem_fraction is not None else knobs.mem_fraction
    startup = startup_overhead_bytes(used)
    where = placement(spec, layout, rules, heaviest)
    kv_per_token = kv_bytes_per_token(spec, where.end_layer - where.first_layer, where.attn_tp)
    if rules is Engine.SGLANG:
        if fraction is None:
            fraction = sglang_default_mem_fraction(spec, layout, smi_total_mib(round(capacity)), knobs)
        headroom = (capacity - startup) * fraction - weights
        flag = f"--mem-fraction-static={fraction:.3f}"
    else:
        fraction = VLLM_DEFAULT_UTILIZATION if fraction is None else fraction
        headroom = capacity * fraction - weights - startup - vllm_activation_bytes(spec, layout, knobs)
        flag = f"--gpu-memory-utilization={fraction:.2f}"
    overhead = capacity - weights - headroom
    kv_tokens = max(0, int(headroom // kv_per_token)) if kv_per_token else None
    verdict, reason = _verdict(spec, rules, weights, startup, capacity, headroom, kv_tokens, flag, knobs)
    return FitResult(
        layout=layout.name,
        engine=engine_name,
        gpus_used=used,
        weights_gib_per_gpu=weights / GIB,
        overhead_gib=overhead / GIB,
        headroom_gib=headroom / GIB,
        verdict=verdict,
        reason=reason,
        heaviest_rank=heaviest,
        gpu_mem_gib=gpu_mem_gib,
        mem_fraction=round(fraction, 4),
        kv_tokens=kv_tokens,
    )


def _heaviest_rank(spec: ModelSpec, layout: Layout, engine: Engine) -> tuple[int, int]:
    """The lowest-numbered rank holding the most weight bytes, and its bytes.

    Ranks placed alike (same stage, same split) hold the same tensors, so each placement is sized once.
    """
    by_placement: dict[RankPlacement, int] = {}
    best_rank, best_bytes = 0, -1
    for rank in range(gpus_used(layout, engine)):
        key = replace(placement(spec, layout, engine, rank), rank=0)
        if key not in by_placement:
            by_placement[key] = sum(t.nbytes for t in placement_plan(spec, key, engine))
        if by_placement[key] > best_bytes:
            best_rank, best_bytes = rank, by_placement[key]
    return best_rank, best_bytes


def _verdict(
    spec: ModelSpec,
    engine: Engine,
    weights: int,
    startup: int,
    capacity: float,
    headroom: float,
    kv_tokens: int | None,
    flag: str,
    knobs: EngineKnobs,
) -> tuple[str, str]:
    need = weights + startup
    if need > capacity:
        return "oom", (
            f"weights need {weights / GIB:.2f} GiB per GPU (+{startup / GIB:.2f} GiB CUDA context/NCCL), "
            f"{(need - capacity) / GIB:.2f} GiB more than the {capacity / GIB:.2f} GiB GPU: OOM while loading"
        )
    if headroom <= 0:
        return "oom", (
            f"weights load, but leave no memory for the KV pool under {flag}: short by {-headroom / GIB:.2f} GiB"
        )
    tokens = f" (~{kv_tokens} tokens)" if kv_tokens is not None else ""
    pool = f"{headroom / GIB:.2f} GiB left for the KV pool{tokens} under {flag}"
    if engine is Engine.VLLM and kv_tokens is not None:
        max_len = knobs.max_model_len or spec.max_position_embeddings
        if max_len and kv_tokens < max_len:
            return "oom", (
                f"only {pool}, less than one max-model-len request of {max_len} tokens: vLLM refuses to start "
                f"(lower --max-model-len)"
            )
    if kv_tokens is not None and kv_tokens < TIGHT_KV_TOKENS:
        return "tight", f"only {pool}, fewer than {TIGHT_KV_TOKENS} tokens"
    return "fits", pool
