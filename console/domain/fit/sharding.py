"""Which part of a model each rank holds, under SGLang's and vLLM's parallelism rules.

SGLang (`python/sglang/srt/...`): a replica has tp x pp ranks, rank = pp_rank x tp + tp_rank. EP is
carved out of TP (moe_tp = tp / ep): a rank holds E/ep experts, each split over moe_tp, so 1/tp of the
expert weights whatever ep is. DP attention splits attention over tp/dp (replicated within a DP group)
and replicates the embedding. PP: even split, the last L % P stages take one extra layer.

vLLM (`vllm/...`): rank = dp_rank x pp x tp + pp_rank x tp + tp_rank. MoE layers see tp x dp ranks: with
`--enable-expert-parallel` whole experts are spread over them (the first E % ep ranks take one more);
without it every expert is tensor-split over tp x dp. PP: the extra layers go to the stages before the
last, counting backwards (`get_pp_indices`).
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.fit.model_spec import ModelSpec
from console.domain.layout import Layout, attention_tp, gpus_used
from console.domain.values import Engine

#: VocabParallelEmbedding pads the vocabulary to a multiple of this before splitting it.
VOCAB_PADDING = 64


@dataclass(frozen=True, slots=True)
class RankPlacement:
    """What one rank holds: its layers, and how each kind of weight is split there."""

    rank: int
    pp_rank: int
    first_layer: int
    end_layer: int
    attn_tp: int
    dense_tp: int
    embed_tp: int
    head_tp: int
    local_experts: int
    expert_tp: int

    @property
    def is_first_stage(self) -> bool:
        return self.pp_rank == 0

    def holds(self, layer: int) -> bool:
        """True when this rank's stage holds decoder layer `layer`."""
        return self.first_layer <= layer < self.end_layer


def pp_partition(num_layers: int, pp: int, engine: Engine | str) -> list[int]:
    """Layers per pipeline stage, as each engine splits them (61 over 8: SGLang 7,7,7,8,8,8,8,8)."""
    base, extra = divmod(num_layers, pp)
    parts = [base] * pp
    if Engine(engine) is Engine.SGLANG:
        for i in range(pp - extra, pp):
            parts[i] += 1
    else:
        for i in range(2, extra + 2):  # vLLM: from the second-to-last stage backwards
            parts[-i % pp] += 1
    return parts


def placement(spec: ModelSpec, layout: Layout, engine: Engine | str, rank: int) -> RankPlacement:
    """Where rank `rank` sits in the layout and what it holds.

    Raises:
        ValueError: the rank is outside the layout's GPUs.
    """
    engine = Engine(engine)
    total = gpus_used(layout, engine)
    if not 0 <= rank < total:
        raise ValueError(f"rank {rank} is outside {layout.name} ({total} GPUs)")
    tp, pp = layout.tp, layout.pp
    experts = spec.num_experts
    if engine is Engine.SGLANG:
        local = rank % (tp * pp)  # plain --dp-size replicas repeat the same ranks
        pp_rank, tp_rank = divmod(local, tp)
        ep = layout.ep if tp % layout.ep == 0 else 1
        local_experts = experts // ep if experts else 0
        expert_tp = tp // ep
        attn_tp = attention_tp(layout, engine)
        embed_tp = 1 if attn_tp != tp else tp
    else:
        dp_rank, rest = divmod(rank, pp * tp)
        pp_rank, tp_rank = divmod(rest, tp)
        moe_ranks = tp * layout.dp
        if layout.ep > 1:
            ep_rank = dp_rank * tp + tp_rank
            base, extra = divmod(experts, moe_ranks)
            local_experts = base + (1 if ep_rank < extra else 0)
            expert_tp = 1
        else:
            local_experts, expert_tp = experts, moe_ranks
        attn_tp = embed_tp = tp
    parts = pp_partition(spec.num_layers, pp, engine)
    first = sum(parts[:pp_rank])
    return RankPlacement(
        rank=rank,
        pp_rank=pp_rank,
        first_layer=first,
        end_layer=first + parts[pp_rank],
        attn_tp=attn_tp,
        dense_tp=tp,
        embed_tp=embed_tp,
        head_tp=tp,
        local_experts=local_experts,
        expert_tp=expert_tp,
    )


def vocab_shard(vocab_size: int, tp: int) -> int:
    """Rows of the embedding or lm_head one rank holds: the padded vocabulary split tp ways."""
    padded = -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    return -(-padded // tp)


def kv_heads_per_rank(spec: ModelSpec, attn_tp: int) -> int:
    """K/V heads per rank; with fewer K/V heads than ranks each head is replicated."""
    return max(1, spec.num_kv_heads // attn_tp)


def shard_problem(spec: ModelSpec, layout: Layout, engine: Engine | str) -> str | None:
    """Why the engine would refuse to shard this model this way (its own words where it has them)."""
    engine = Engine(engine)
    first = placement(spec, layout, engine, 0)
    if spec.num_layers < layout.pp:
        return f"{spec.num_layers} layers cannot fill {layout.pp} pipeline stages"
    if spec.num_heads % first.attn_tp:
        return (
            f"Total number of attention heads ({spec.num_heads}) must be divisible by "
            f"tensor parallel size ({first.attn_tp})."
        )
    if spec.attention == "gqa":
        kv, tp = spec.num_kv_heads, first.attn_tp
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            return f"Total number of key/value heads ({kv}) and tensor parallel size ({tp}) must divide each other."
    dense_layers = spec.num_layers - len(spec.moe_layers)
    if dense_layers and spec.intermediate_size % first.dense_tp:
        return f"intermediate_size {spec.intermediate_size} is not divisible by TP {first.dense_tp}"
    quant = spec.quant
    if spec.is_moe:
        inter = spec.moe_intermediate_size
        if inter % first.expert_tp:
            return f"moe_intermediate_size {inter} is not divisible by the expert TP size {first.expert_tp}"
        part = inter // first.expert_tp
        if quant.method == "fp8" and quant.block_n and not quant.is_skipped(_expert_probe(spec)):
            if part % quant.block_n:
                return (
                    f"The output_size of gate's and up's weight = {part} is not divisible by "
                    f"weight quantization block_n = {quant.block_n}."
                )
            if first.expert_tp > 1 and quant.block_k and part % quant.block_k:
                return (
                    f"The input_size of down's weight = {part} is not divisible by "
                    f"weight quantization block_k = {quant.block_k}."
                )
        if quant.method == "int" and not quant.is_skipped(_expert_probe(spec)):
            unit = quant.group_size or (32 // quant.bits)
            if part % unit or part % (32 // quant.bits):
                return f"expert intermediate size per rank {part} is not divisible by the int{quant.bits} group size {unit}"
    if quant.method == "fp8" and quant.block_n and first.dense_tp > 1 and dense_layers:
        part = spec.intermediate_size // first.dense_tp
        if not quant.is_skipped(f"model.layers.{_first_dense(spec)}.mlp.down_proj") and part % quant.block_k:
            return (
                f"Weight input_size_per_partition = {part} is not divisible by "
                f"weight quantization block_k = {quant.block_k}."
            )
    return None


def _expert_probe(spec: ModelSpec) -> str:
    layer = spec.moe_layers[0] if spec.moe_layers else 0
    return f"model.layers.{layer}.mlp.experts.0.down_proj"


def _first_dense(spec: ModelSpec) -> int:
    moe = set(spec.moe_layers)
    return next((i for i in range(spec.num_layers) if i not in moe), 0)
