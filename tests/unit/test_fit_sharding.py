"""Per-engine sharding rules: what each rank holds, tensor by tensor."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.domain.fit.model_spec import ModelSpec, load_model_spec
from console.domain.fit.sharding import placement, pp_partition
from console.domain.fit.weights import TensorAlloc, rank_load_plan
from console.domain.layout import parse_layout

MODELS = Path(__file__).resolve().parents[1] / "models"


def spec(name: str) -> ModelSpec:
    return load_model_spec(MODELS / name)


KIMI = "moonshotai--Kimi-K2.6.json"
DEEPSEEK = "deepseek-ai--DeepSeek-V3.json"
QWEN_FP8 = "Qwen--Qwen3-235B-A22B-FP8.json"


def plan(name: str, layout: str, engine: str = "sglang", rank: int = 0) -> list[TensorAlloc]:
    return rank_load_plan(spec(name), parse_layout(layout), engine, rank)


def tensor(tensors: list[TensorAlloc], suffix: str, layer: int | None = 5) -> TensorAlloc:
    found = [t for t in tensors if t.name.endswith(suffix) and t.layer == layer]
    assert len(found) == 1, f"{suffix} in layer {layer}: {[t.name for t in found]}"
    return found[0]


def test_pp_partitions_per_engine() -> None:
    assert pp_partition(61, 8, "sglang") == [7, 7, 7, 8, 8, 8, 8, 8]  # last L % P stages take one more
    assert pp_partition(61, 8, "vllm") == [7, 7, 8, 8, 8, 8, 8, 7]  # extra layers before the last stage
    assert pp_partition(22, 4, "vllm") == [5, 6, 6, 5]
    assert pp_partition(32, 4, "vllm") == [8, 8, 8, 8]


def test_embedding_on_the_first_stage_and_lm_head_on_the_last() -> None:
    first, middle, last = (plan(KIMI, "PP8", rank=r) for r in (0, 3, 7))
    names = [{t.name for t in p} for p in (first, middle, last)]
    assert "model.embed_tokens.weight" in names[0] and "lm_head.weight" not in names[0]
    assert "model.embed_tokens.weight" not in names[1] and "lm_head.weight" not in names[1]
    assert "lm_head.weight" in names[2] and "model.embed_tokens.weight" not in names[2]
    assert {t.layer for t in last if t.layer is not None} == set(range(53, 61))


@pytest.mark.parametrize("layout", ["TP4", "TP4 EP2", "TP4 EP4"])
def test_sglang_experts_are_a_quarter_per_gpu_whatever_ep(layout: str) -> None:
    w2 = tensor(plan(KIMI, layout), "mlp.experts.w2_weight_packed")
    assert w2.nbytes == 384 * 7168 * 2048 // 2 // 4


def test_sglang_ep_carves_whole_experts_out_of_tp() -> None:
    where = placement(spec(KIMI), parse_layout("TP4 EP2"), "sglang", 3)
    assert (where.local_experts, where.expert_tp) == (192, 2)


def test_vllm_ep_spreads_whole_experts_without_tensor_splitting() -> None:
    kimi = spec(KIMI)
    where = placement(kimi, parse_layout("-tp 8 --enable-expert-parallel"), "vllm", 5)
    assert (where.local_experts, where.expert_tp) == (48, 1)
    w2 = tensor(plan(KIMI, "-tp 8 --enable-expert-parallel", "vllm", 5), "w2_weight_packed")
    assert w2.nbytes == 48 * (2048 // 8) * 7168 * 4
    no_ep = placement(kimi, parse_layout("-tp 4 -dp 2"), "vllm", 5)
    assert (no_ep.local_experts, no_ep.expert_tp) == (384, 8)  # MoE layers split over tp x dp


def test_vllm_uneven_expert_split_gives_the_first_ranks_one_more() -> None:
    layout = parse_layout("-tp 3 --enable-expert-parallel")
    mixtral = spec("mistralai--Mixtral-8x7B-v0.1.json")
    assert [placement(mixtral, layout, "vllm", r).local_experts for r in range(3)] == [3, 3, 2]


def test_mla_low_rank_projections_are_replicated_and_the_rest_split() -> None:
    tp1, tp8 = plan(KIMI, "TP1"), plan(KIMI, "TP8")
    for suffix in ("q_a_proj.weight", "kv_a_proj_with_mqa.weight"):
        assert tensor(tp1, suffix).nbytes == tensor(tp8, suffix).nbytes
    for suffix in ("q_b_proj.weight", "kv_b_proj.weight", "o_proj.weight"):
        assert tensor(tp1, suffix).nbytes == 8 * tensor(tp8, suffix).nbytes


def test_dp_attention_replicates_attention_within_its_group() -> None:
    dpa = plan(KIMI, "TP8 DP8 DPA")
    tp1 = plan(KIMI, "TP1")
    assert tensor(dpa, "o_proj.weight").nbytes == tensor(tp1, "o_proj.weight").nbytes
    assert tensor(dpa, "w2_weight_packed").nbytes == tensor(plan(KIMI, "TP8"), "w2_weight_packed").nbytes
    half = plan(KIMI, "TP8 DP2 DPA")  # attention TP 4
    assert 4 * tensor(half, "o_proj.weight").nbytes == tensor(tp1, "o_proj.weight").nbytes


def test_vocab_parallel_embedding_and_lm_head_split_over_tp() -> None:
    tp8 = plan(KIMI, "TP8")
    rows = 163840 // 8
    assert tensor(tp8, "model.embed_tokens.weight", None).nbytes == rows * 7168 * 2
    assert tensor(tp8, "lm_head.weight", None).nbytes == rows * 7168 * 2


def test_int4_ignore_list_keeps_attention_shared_experts_dense_mlp_and_lm_head_in_bf16() -> None:
    tp1 = plan(KIMI, "TP1")
    assert tensor(tp1, "self_attn.o_proj.weight").nbytes == 7168 * 64 * 128 * 2
    assert tensor(tp1, "shared_experts.down_proj.weight").nbytes == 7168 * 2048 * 2
    assert tensor(tp1, "mlp.gate_up_proj.weight", 0).nbytes == 2 * 18432 * 7168 * 2  # layer 0 is dense
    assert not [t for t in tp1 if "self_attn" in t.name and "packed" in t.name]
    # Experts: int32-packed weight plus one bf16 scale per group of 32 along the input dimension.
    assert tensor(tp1, "w13_weight_scale").nbytes == 384 * (7168 // 32) * 2 * 2048 * 2


def test_fp8_block_scales_and_modules_not_converted() -> None:
    qwen = plan(QWEN_FP8, "TP4")
    assert tensor(qwen, "mlp.gate.weight").nbytes == 128 * 4096 * 2  # router listed as not converted
    qkv = tensor(qwen, "self_attn.qkv_proj.weight")
    assert qkv.nbytes == (64 // 4 + 2 * 1) * 128 * 4096  # fp8: one byte; 4 K/V heads over 4 ranks
    assert tensor(qwen, "self_attn.qkv_proj.weight_scale_inv").nbytes == (18 * 128 // 128) * (4096 // 128) * 4
    w13_scales = tensor(qwen, "w13_weight_scale_inv")
    assert w13_scales.nbytes == 128 * 2 * (384 // 128) * (4096 // 128) * 4


def test_kv_heads_are_replicated_when_fewer_than_ranks() -> None:
    qwen = plan(QWEN_FP8, "TP8 EP8")
    assert tensor(qwen, "self_attn.qkv_proj.weight").nbytes == (64 // 8 + 2) * 128 * 4096


def test_deepseek_fp8_attention_is_quantized_with_block_scales() -> None:
    tp8 = plan(DEEPSEEK, "TP8")
    assert tensor(tp8, "kv_b_proj.weight").nbytes == (128 // 8) * 256 * 512
    assert tensor(tp8, "kv_b_proj.weight_scale_inv").nbytes == (16 * 256 // 128) * (512 // 128) * 4
    # SGLang keeps bf16 copies of kv_b split into w_kc and w_vc after loading.
    assert tensor(tp8, "self_attn.w_kc").nbytes == 16 * 128 * 512 * 2
    assert not [t for t in plan(DEEPSEEK, "-tp 8", "vllm") if t.name.endswith("w_kc")]


def test_plan_is_in_load_order() -> None:
    tp8 = plan(KIMI, "TP8")
    layers = [t.layer for t in tp8 if t.layer is not None and not t.name.endswith(("w_kc", "w_vc"))]
    assert layers == sorted(layers)
    assert tp8[0].name == "vision_tower+mm_projector"
    assert tp8[1].name == "model.embed_tokens.weight"


def test_rank_outside_the_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        plan(KIMI, "TP4 EP2", rank=4)


def test_sglang_plain_dp_replicas_repeat_the_first_replica() -> None:
    assert plan(KIMI, "TP8 DP2", rank=9) == plan(KIMI, "TP8 DP2", rank=1)
