"""Engine memory budgets: SGLang's auto mem fraction, memory flags, KV bytes per token, capacities."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.fit.engine_memory import (
    EngineKnobs,
    knobs_from_args,
    kv_bytes_per_token,
    sglang_default_mem_fraction,
    smi_total_mib,
    torch_capacity_bytes,
    vllm_activation_bytes,
)
from console.domain.fit.model_spec import load_model_spec
from console.domain.layout import Layout
from console.domain.sizes import GIB

MODELS = Path(__file__).resolve().parents[1] / "models"
DEEPSEEK = load_model_spec(MODELS / "deepseek-ai--DeepSeek-V3.json")
LLAMA = load_model_spec(MODELS / "meta-llama--Llama-3.1-8B-Instruct.json")
KIMI = load_model_spec(MODELS / "moonshotai--Kimi-K2.6.json")


@pytest.mark.parametrize(
    ("gpu_mib", "layout", "fraction"),
    [
        # 512 + 8192 x 1.5 + 512 x 2 + 8/8 x 1024 = 14848 MiB reserved
        (81920, Layout(tp=8), round((81920 - 14848) / 81920, 3)),
        # TP1 on 80 GB: 512 + 12288 + 256 x 2 + 128 = 13440
        (81920, Layout(tp=1), round((81920 - 13440) / 81920, 3)),
        # small card: 2048-token chunks, graphs up to 24, no 10 GiB floor
        (24564, Layout(tp=1), round((24564 - (512 + 3072 + 48 + 128)) / 24564, 3)),
        # 96 GB card, TP8: 14848 MiB reserved
        (97887, Layout(tp=8), 0.848),
        # DP attention pads per DP rank: + 512 x 8 x 3 + 512 x 8 x 1.5
        (97887, Layout(tp=8, dp=8, dp_attention=True), round((97887 - 14848 - 18432) / 97887, 3)),
    ],
)
def test_sglang_auto_mem_fraction(gpu_mib: int, layout: Layout, fraction: float) -> None:
    assert sglang_default_mem_fraction(DEEPSEEK, layout, gpu_mib) == pytest.approx(fraction)


def test_sglang_floor_of_10_gib_on_big_cards() -> None:
    knobs = EngineKnobs(chunked_prefill_size=2048, cuda_graph_max_bs=8)
    assert sglang_default_mem_fraction(DEEPSEEK, Layout(tp=1), 97887, knobs) == round(
        (97887 - 10240) / 97887, 3
    )


def test_multimodal_models_get_sglangs_vision_reduction() -> None:
    text_only = sglang_default_mem_fraction(DEEPSEEK, Layout(tp=8), 97887)
    assert sglang_default_mem_fraction(KIMI, Layout(tp=8), 97887) == pytest.approx(text_only * 0.95)


def test_memory_flags_are_read_from_pass_through_args() -> None:
    knobs = knobs_from_args(
        [
            "--mem-fraction-static",
            "0.85",
            "--max-model-len=32768",
            "--cuda-graph-max-bs",
            "64",
            "--bogus",
            "1",
        ]
    )
    assert knobs == EngineKnobs(mem_fraction=0.85, max_model_len=32768, cuda_graph_max_bs=64)
    assert knobs_from_args(["--gpu-memory-utilization", "0.95"]).mem_fraction == 0.95
    assert knobs_from_args(["--mem-fraction-static", "lots"]).mem_fraction is None
    assert knobs_from_args(["--max-model-len"]).max_model_len is None


def test_kv_bytes_per_token() -> None:
    # MLA: one 512 + 64 latent per layer, bf16, the same on every TP rank
    assert kv_bytes_per_token(DEEPSEEK, 61, 8) == 61 * 576 * 2
    # GQA: K and V for 8 heads of 128, bf16, 32 layers = 128 KiB
    assert kv_bytes_per_token(LLAMA, 32, 1) == 128 * 1024
    assert kv_bytes_per_token(LLAMA, 32, 8) == 16 * 1024
    assert kv_bytes_per_token(LLAMA, 32, 16) == 16 * 1024  # K/V heads replicate past 8 ranks


def test_vllm_activation_estimate_is_around_a_gib_for_llama_8b() -> None:
    assert 0.5 * GIB < vllm_activation_bytes(LLAMA, Layout()) < 2 * GIB
    assert vllm_activation_bytes(LLAMA, Layout(), EngineKnobs(max_num_batched_tokens=2048)) < GIB / 2


def test_seed_card_capacity() -> None:
    assert round(torch_capacity_bytes(97887) / GIB, 2) == 94.97


@given(st.integers(min_value=1024, max_value=300_000))
def test_capacity_round_trips_to_nvidia_smi_mib(mib: int) -> None:
    assert smi_total_mib(torch_capacity_bytes(mib)) == mib
