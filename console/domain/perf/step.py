"""One engine step of one pipeline stage, as physics terms the coefficients then weigh.

Decode reads, on the stage's busiest rank: every weight a step always uses, the routed experts the
batch touches (of E experts with top-k routing, T tokens touch E(1 - (1 - k/E)^T) on average; under EP
the busiest rank holds more than its share, mean + sqrt(2 mean ln n)), and the KV cache of its batch.
FLOPs are 2 per parameter per token (experts: k per token, spread over the MoE ranks) plus attention
over the context. Memory and compute overlap within a part (roofline max), the parts add up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from console.domain.fit import kv_bytes_per_token
from console.domain.layout import Layout
from console.domain.perf import comm
from console.domain.perf.hardware import GpuKind, LinkKind
from console.domain.perf.shape import PerfModel, StageWeights
from console.domain.values import Engine

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True, slots=True)
class Coefficients:
    """What a host and engine achieve of the physics: the few numbers calibration moves.

    `bw_eff` and `mfu` are shares of peak memory bandwidth and dense FLOPs; `layer_us` is the fixed
    cost of one layer's kernels per step; `step_us` the scheduler, sampling and launch cost of a step;
    `comm_scale` multiplies the latency of all-reduces and handoffs (P2P, NCCL tuning, custom
    all-reduce), `a2a_scale` that of EP's dispatch and combine (a different kernel on the same links).
    """

    # Tuned once on the dev set's tuning part (tests/perf_dev.py), never on the held-out part.
    bw_eff: float = 0.75
    mfu: float = 0.4
    layer_us: float = 35.0
    step_us: float = 2000.0
    comm_scale: float = 1.0
    a2a_scale: float = 1.0


@dataclass(frozen=True, slots=True)
class StepTerms:
    """A step's physics before coefficients: seconds at full bandwidth and peak FLOPs."""

    mem_s: tuple[float, ...]
    compute_s: tuple[float, ...]
    layers: int
    comm_latency_s: float
    comm_transfer_s: float
    a2a_latency_s: float = 0.0

    def seconds(self, k: Coefficients) -> float:
        """The step's time under coefficients `k`."""
        work = sum(max(m / k.bw_eff, c / k.mfu) for m, c in zip(self.mem_s, self.compute_s, strict=True))
        return (
            work
            + self.layers * k.layer_us * 1e-6
            + self.comm_latency_s * k.comm_scale
            + self.a2a_latency_s * k.a2a_scale
            + self.comm_transfer_s
        )


@dataclass(frozen=True, slots=True)
class Batch:
    """Tokens a step carries: per attention group, through the MoE, and the context each attends to."""

    attn_tokens: float
    moe_tokens: float
    context: float
    prefill: bool = False


@dataclass(frozen=True, slots=True)
class Fabric:
    """The links a layout's collectives cross."""

    intra: LinkKind
    inter: LinkKind
    gpus_per_node: int

    def over(self, ranks: int) -> LinkKind:
        return self.intra if ranks <= self.gpus_per_node else self.inter


def stage_terms(
    model: PerfModel,
    weights: StageWeights,
    layout: Layout,
    engine: Engine,
    gpu: GpuKind,
    fabric: Fabric,
    batch: Batch,
) -> StepTerms:
    """The terms of one step of one stage for `batch`."""
    spec = model.spec
    bw = gpu.mem_bw_tbs * 1e12
    peak = gpu.peak_tflops(model.compute_dtype) * 1e12
    k, experts = model.experts_per_token, spec.num_experts
    moe_ranks = _moe_ranks(layout, engine)
    # Weights every step reads, and their FLOPs for this group's tokens.
    always_mem = weights.always_bytes / bw
    always_flops = 2 * weights.always_params * batch.attn_tokens
    # Routed experts: the touched share of this rank's, and its share of the batch's expert FLOPs.
    expert_mem = expert_flops = 0.0
    if weights.moe_layers and experts:
        if batch.prefill:
            share = 1.0
        else:
            touched = experts * (1 - (1 - k / experts) ** batch.moe_tokens)
            local = weights.local_experts
            mean = local * touched / experts
            n_holders = max(1, experts // max(1, local))
            busiest = min(local, mean + math.sqrt(2 * mean * math.log(n_holders))) if n_holders > 1 else mean
            share = busiest / max(1, local)
        expert_mem = weights.expert_bytes * share / bw
        expert_flops = (
            2 * batch.moe_tokens * k * weights.expert_params_per_expert / moe_ranks * weights.moe_layers
        )
    # Attention over the context: the KV cache read, and QK^T plus PV.
    kv_per_token = kv_bytes_per_token(spec, weights.layers, weights.attn_tp)
    kv_mem = 0.0 if batch.prefill else batch.attn_tokens * batch.context * kv_per_token / bw
    heads = max(1, spec.num_heads // weights.attn_tp)
    qk_dim = spec.kv_lora_rank + spec.qk_rope_head_dim if spec.attention == "mla" else spec.head_dim
    attn_flops = 4 * batch.attn_tokens * batch.context * heads * qk_dim * weights.layers
    latency, a2a_latency, transfer = _collectives(model, weights, layout, engine, fabric, batch, moe_ranks)
    return StepTerms(
        mem_s=(always_mem, expert_mem, kv_mem),
        compute_s=(always_flops / peak, expert_flops / peak, attn_flops / peak),
        layers=weights.layers,
        comm_latency_s=latency,
        comm_transfer_s=transfer,
        a2a_latency_s=a2a_latency,
    )


def _moe_ranks(layout: Layout, engine: Engine) -> int:
    """GPUs one MoE layer's experts are spread over (vLLM: tp x dp; SGLang: the TP group)."""
    return layout.tp * (layout.dp if engine is not Engine.SGLANG else 1)


def _collectives(
    model: PerfModel,
    weights: StageWeights,
    layout: Layout,
    engine: Engine,
    fabric: Fabric,
    batch: Batch,
    moe_ranks: int,
) -> tuple[float, float, float]:
    """All-reduce latency, all-to-all latency and transfer seconds of one stage's collectives in a step."""
    hidden = model.spec.hidden_size
    attn_msg = batch.attn_tokens * hidden * ACT_BYTES
    moe_msg = batch.moe_tokens * hidden * ACT_BYTES
    dense_layers = weights.layers - weights.moe_layers
    costs: list[tuple[comm.CollectiveCost, float]] = []
    a2a_costs: list[tuple[comm.CollectiveCost, float]] = []
    attn_tp = weights.attn_tp
    costs.append((comm.all_reduce(fabric.over(attn_tp), attn_tp, attn_msg), weights.layers))
    if dense_layers:
        costs.append((comm.all_reduce(fabric.over(layout.tp), layout.tp, moe_msg), dense_layers))
    if weights.moe_layers:
        gathered = moe_ranks > attn_tp  # DP attention / vLLM DP: tokens gathered to the MoE group
        if layout.ep > 1:
            per_rank = moe_msg / moe_ranks * model.experts_per_token
            a2a = comm.all_to_all(fabric.over(moe_ranks), moe_ranks, per_rank)
            a2a_costs.append((a2a, 2 * weights.moe_layers))  # dispatch and combine
        else:
            costs.append((comm.all_reduce(fabric.over(moe_ranks), moe_ranks, moe_msg), weights.moe_layers))
        if gathered and layout.ep == 1:
            costs.append((comm.all_reduce(fabric.over(moe_ranks), moe_ranks, moe_msg), weights.moe_layers))
    latency = sum(c.latency_s * n for c, n in costs)
    a2a_latency = sum(c.latency_s * n for c, n in a2a_costs)
    transfer = sum(c.transfer_s * n for c, n in costs + a2a_costs)
    return latency, a2a_latency, transfer
