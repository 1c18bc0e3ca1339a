"""The weight tensors one rank allocates, in the order the engine creates them.

Model init creates the parameters module by module: the vision tower (multimodal wrappers), the
embedding (first stage), then each decoder layer of the stage (attention, then the MLP or MoE, then
its norms), the final norm and lm_head (last stage). An OOM during loading happens at the first
tensor that does not fit, which is what the simulated engine replays. SGLang's MLA then adds bf16
copies of `kv_b_proj` split into `w_kc` and `w_vc` (post_load_weights); they are listed last.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.fit.model_spec import ModelSpec
from console.domain.fit.quant import FP32_BYTES, linear_tensors, moe_tensors
from console.domain.fit.sharding import RankPlacement, kv_heads_per_rank, placement, vocab_shard
from console.domain.layout import Layout
from console.domain.values import Engine


@dataclass(frozen=True, slots=True)
class TensorAlloc:
    """One weight allocation on one rank; `layer` is the decoder layer, None outside the layers."""

    name: str
    layer: int | None
    nbytes: int


def rank_load_plan(spec: ModelSpec, layout: Layout, engine: Engine | str, rank: int) -> list[TensorAlloc]:
    """The tensors rank `rank` allocates for its weights, in load order.

    Args:
        spec: the model.
        layout: the parallel layout (assumed valid: see `check_layout` and `shard_problem`).
        engine: `sglang` or `vllm` (any other engine is planned with vLLM's rules).
        rank: the global rank, 0 <= rank < gpus_used(layout, engine).

    Returns:
        The allocations; their sizes sum to the rank's weight bytes.
    """
    engine = Engine(engine)
    if engine is Engine.OPENAI:
        engine = Engine.VLLM
    return placement_plan(spec, placement(spec, layout, engine, rank), engine)


def placement_plan(spec: ModelSpec, where: RankPlacement, engine: Engine) -> list[TensorAlloc]:
    """The load plan of a rank placed at `where` (ranks placed alike hold the same tensors)."""
    plan: list[TensorAlloc] = []
    if where.is_first_stage:
        if spec.vision_params:
            plan.append(TensorAlloc("vision_tower+mm_projector", None, spec.vision_params * spec.dtype_bytes))
        rows = spec.vocab_size if where.embed_tp == 1 else vocab_shard(spec.vocab_size, where.embed_tp)
        plan.append(
            TensorAlloc("model.embed_tokens.weight", None, rows * spec.hidden_size * spec.dtype_bytes)
        )
    for layer in range(where.first_layer, where.end_layer):
        plan += _layer(spec, where, layer)
    if where.end_layer == spec.num_layers:
        plan.append(TensorAlloc("model.norm.weight", None, spec.hidden_size * spec.dtype_bytes))
        # A tied lm_head is the embedding itself, unless the embedding lives on another stage.
        if not (spec.tie_word_embeddings and where.is_first_stage):
            rows = vocab_shard(spec.vocab_size, where.head_tp)
            plan.append(TensorAlloc("lm_head.weight", None, rows * spec.hidden_size * spec.dtype_bytes))
    if spec.attention == "mla":
        plan += _mla_post_load(spec, where, engine)
    return plan


def _mla_post_load(spec: ModelSpec, where: RankPlacement, engine: Engine) -> list[TensorAlloc]:
    """Absorbed-MLA copies of kv_b_proj made after loading, in the model dtype.

    SGLang copies kv_b into contiguous `w_kc` and `w_vc` (post_load_weights). vLLM keeps views of
    kv_b's weight, so it only pays when kv_b is quantized and has to be dequantized first.
    """
    heads = spec.num_heads // where.attn_tp
    kc = heads * spec.qk_nope_head_dim * spec.kv_lora_rank * spec.dtype_bytes
    vc = heads * spec.v_head_dim * spec.kv_lora_rank * spec.dtype_bytes
    plan: list[TensorAlloc] = []
    for layer in range(where.first_layer, where.end_layer):
        prefix = f"model.layers.{layer}.self_attn"
        if engine is Engine.SGLANG:
            plan += [TensorAlloc(f"{prefix}.w_kc", layer, kc), TensorAlloc(f"{prefix}.w_vc", layer, vc)]
        elif not spec.quant.is_skipped(f"{prefix}.kv_b_proj"):
            plan.append(TensorAlloc(f"{prefix}.kv_b_proj.dequantized", layer, kc + vc))
    return plan


def rank_weight_bytes(spec: ModelSpec, layout: Layout, engine: Engine | str, rank: int) -> int:
    """Total weight bytes on one rank."""
    return sum(t.nbytes for t in rank_load_plan(spec, layout, engine, rank))


def _layer(spec: ModelSpec, where: RankPlacement, layer: int) -> list[TensorAlloc]:
    prefix = f"model.layers.{layer}"
    tensors = _mla(spec, where, prefix) if spec.attention == "mla" else _gqa(spec, where, prefix)
    if layer in spec.moe_layers:
        tensors += _moe(spec, where, prefix)
    else:
        tensors += _mlp(spec, f"{prefix}.mlp", spec.intermediate_size // where.dense_tp)
    tensors += [
        (f"{prefix}.input_layernorm.weight", spec.hidden_size * spec.dtype_bytes),
        (f"{prefix}.post_attention_layernorm.weight", spec.hidden_size * spec.dtype_bytes),
    ]
    return [TensorAlloc(name, layer, nbytes) for name, nbytes in tensors]


def _linear(spec: ModelSpec, module: str, out: int, inp: int, *, bias: bool = False) -> list[tuple[str, int]]:
    return linear_tensors(spec.quant, module, out, inp, spec.dtype_bytes, bias=bias)


def _mla(spec: ModelSpec, where: RankPlacement, prefix: str) -> list[tuple[str, int]]:
    """DeepSeek MLA: q_a and kv_a are replicated; q_b, kv_b and o_proj are split over attention TP."""
    attn = f"{prefix}.self_attn"
    heads = spec.num_heads // where.attn_tp
    hidden, b = spec.hidden_size, spec.dtype_bytes
    qk_head = spec.qk_nope_head_dim + spec.qk_rope_head_dim
    tensors: list[tuple[str, int]] = []
    if spec.q_lora_rank:
        tensors += _linear(spec, f"{attn}.q_a_proj", spec.q_lora_rank, hidden)
        tensors.append((f"{attn}.q_a_layernorm.weight", spec.q_lora_rank * b))
        tensors += _linear(spec, f"{attn}.q_b_proj", heads * qk_head, spec.q_lora_rank)
    else:
        tensors += _linear(spec, f"{attn}.q_proj", heads * qk_head, hidden)
    tensors += _linear(spec, f"{attn}.kv_a_proj_with_mqa", spec.kv_lora_rank + spec.qk_rope_head_dim, hidden)
    tensors.append((f"{attn}.kv_a_layernorm.weight", spec.kv_lora_rank * b))
    kv_b_out = heads * (spec.qk_nope_head_dim + spec.v_head_dim)
    tensors += _linear(spec, f"{attn}.kv_b_proj", kv_b_out, spec.kv_lora_rank)
    tensors += _linear(spec, f"{attn}.o_proj", hidden, heads * spec.v_head_dim)
    return tensors


def _gqa(spec: ModelSpec, where: RankPlacement, prefix: str) -> list[tuple[str, int]]:
    """Fused q/k/v (K/V heads replicated when fewer than ranks) and o_proj, split over attention TP."""
    attn = f"{prefix}.self_attn"
    heads = spec.num_heads // where.attn_tp
    kv = kv_heads_per_rank(spec, where.attn_tp)
    qkv_out = (heads + 2 * kv) * spec.head_dim
    tensors = _linear(spec, f"{attn}.qkv_proj", qkv_out, spec.hidden_size, bias=spec.attention_bias)
    tensors += _linear(spec, f"{attn}.o_proj", spec.hidden_size, heads * spec.head_dim)
    if spec.qk_norm:
        tensors += [
            (f"{attn}.q_norm.weight", spec.head_dim * 2),
            (f"{attn}.k_norm.weight", spec.head_dim * 2),
        ]
    return tensors


def _mlp(spec: ModelSpec, module: str, inter: int) -> list[tuple[str, int]]:
    """A gated MLP: merged gate/up (column-parallel) and down (row-parallel)."""
    return _linear(spec, f"{module}.gate_up_proj", 2 * inter, spec.hidden_size) + _linear(
        spec, f"{module}.down_proj", spec.hidden_size, inter
    )


def _moe(spec: ModelSpec, where: RankPlacement, prefix: str) -> list[tuple[str, int]]:
    """Router (replicated, unquantized), the fused routed experts, then the shared experts."""
    mlp = f"{prefix}.mlp"
    tensors = [(f"{mlp}.gate.weight", spec.num_experts * spec.hidden_size * spec.dtype_bytes)]
    if spec.router_bias:
        tensors.append((f"{mlp}.gate.e_score_correction_bias", spec.num_experts * FP32_BYTES))
    tensors += moe_tensors(
        spec.quant,
        f"{mlp}.experts",
        where.local_experts,
        spec.moe_intermediate_size // where.expert_tp,
        spec.hidden_size,
        spec.dtype_bytes,
    )
    if spec.shared_expert_intermediate_size:
        shared = f"{mlp}.shared_experts"
        tensors += _mlp(spec, shared, spec.shared_expert_intermediate_size // where.dense_tp)
    return tensors
