"""ModelSpec from Hugging Face config.json files: model families, quantization, bad input."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.domain.fit.model_spec import ModelSpec, load_model_spec
from console.domain.fit.predict import predict_fit
from console.domain.layout import Layout
from console.errors import UsageError

MODELS = Path(__file__).resolve().parents[1] / "models"
REPO = Path(__file__).resolve().parents[2]


def raw(name: str) -> dict[str, Any]:
    return json.loads((MODELS / name).read_text())


def test_multimodal_wrapper_reads_text_config() -> None:
    k26 = load_model_spec(MODELS / "moonshotai--Kimi-K2.6.json")
    assert k26.architecture == "KimiK25ForConditionalGeneration"
    assert (k26.attention, k26.num_layers, k26.num_experts) == ("mla", 61, 384)
    assert k26.moe_layers == tuple(range(1, 61))  # first_k_dense_replace = 1
    assert (k26.quant.method, k26.quant.bits, k26.quant.group_size) == ("int", 4, 32)
    assert k26.vision_params > 0
    k25 = load_model_spec(MODELS / "moonshotai--Kimi-K2.5.json")
    assert k25.moe_layers == k26.moe_layers and k25.quant.bits == 4


def test_deepseek_v3_fields() -> None:
    ds = load_model_spec(MODELS / "deepseek-ai--DeepSeek-V3.json")
    assert ds.moe_layers == tuple(range(3, 61))
    assert ds.shared_expert_intermediate_size == 2048
    assert (ds.quant.method, ds.quant.block_n, ds.quant.block_k) == ("fp8", 128, 128)
    assert ds.router_bias and ds.vision_params == 0


def test_qwen3_moe_mlp_only_layers_and_sparse_step() -> None:
    data = raw("Qwen--Qwen3-30B-A3B.json")
    assert ModelSpec.from_config(data).moe_layers == tuple(range(48))
    data["mlp_only_layers"] = [0, 1]
    data["decoder_sparse_step"] = 2
    spec = ModelSpec.from_config(data)
    assert spec.moe_layers == tuple(i for i in range(3, 48, 2))  # (i + 1) % 2 == 0, not 0 or 1
    assert spec.qk_norm and spec.num_kv_heads == 4 and spec.head_dim == 128


def test_mixtral_num_local_experts_in_every_layer() -> None:
    spec = load_model_spec(MODELS / "mistralai--Mixtral-8x7B-v0.1.json")
    assert (spec.num_experts, spec.moe_intermediate_size) == (8, 14336)
    assert spec.moe_layers == tuple(range(32))


def test_dense_llama_has_no_experts() -> None:
    spec = load_model_spec(MODELS / "meta-llama--Llama-3.1-8B-Instruct.json")
    assert not spec.is_moe and spec.quant.method == "none" and spec.quant.label == "bf16"


def test_fp8_modules_to_not_convert_are_kept() -> None:
    spec = load_model_spec(MODELS / "Qwen--Qwen3-235B-A22B-FP8.json")
    assert spec.quant.is_skipped("lm_head")
    assert spec.quant.is_skipped("model.layers.7.mlp.gate")
    assert not spec.quant.is_skipped("model.layers.7.mlp.experts.0.down_proj")


def test_load_model_spec_accepts_a_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((MODELS / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    assert load_model_spec(tmp_path).num_layers == 32


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such model config"),
        (b'{\n  "hidden_size": ,\n}', ":2: not valid JSON"),
        (b"\xff\xfe garbage", "cannot read model config"),
        (b"[1, 2]", "must hold a JSON object"),
        (b'{"num_hidden_layers": 2}', "missing hidden_size"),
        (b'{"num_hidden_layers": "61", "hidden_size": 8}', "num_hidden_layers must be an integer"),
    ],
)
def test_bad_model_configs_are_one_line_usage_errors(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "config.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UsageError) as info:
        load_model_spec(path)
    message = str(info.value)
    assert words in message and str(path) in message and "\n" not in message
    assert info.value.exit_code == 2


def test_unmodelled_quantization_is_refused() -> None:
    data = raw("meta-llama--Llama-3.1-8B-Instruct.json")
    data["quantization_config"] = {"quant_method": "awq", "bits": 4}
    with pytest.raises(ValueError, match="'awq' is not modelled"):
        ModelSpec.from_config(data)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
_keys = st.sampled_from(
    [
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "kv_lora_rank",
        "q_lora_rank",
        "n_routed_experts",
        "num_experts",
        "moe_intermediate_size",
        "first_k_dense_replace",
        "moe_layer_freq",
        "mlp_only_layers",
        "decoder_sparse_step",
        "quantization_config",
        "intermediate_size",
        "head_dim",
        "text_config",
        "vision_config",
    ]
)


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.sampled_from(
        [
            "moonshotai--Kimi-K2.6.json",
            "Qwen--Qwen3-235B-A22B-FP8.json",
            "meta-llama--Llama-3.1-8B-Instruct.json",
        ]
    ),
    st.lists(st.tuples(_keys, _json_values), min_size=1, max_size=3),
)
def test_mutated_configs_raise_value_error_or_predict(name: str, edits: list[tuple[str, Any]]) -> None:
    data = copy.deepcopy(raw(name))
    target = data.get("text_config", data)
    for key, value in edits:
        target[key] = value
    try:
        spec = ModelSpec.from_config(data)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    for layout in (Layout(tp=1), Layout(tp=4, ep=2), Layout(pp=4)):
        result = predict_fit(spec, layout, "sglang", gpu_mem_gib=80.0)
        assert result.verdict in ("fits", "tight", "oom", "invalid")


def test_domain_runs_on_plain_python_without_site_packages() -> None:
    code = (
        "import sys; from console.domain.fit.predict import predict_fit; "
        "from console.domain.fit.model_spec import load_model_spec; from console.domain.layout import parse_layout; "
        f"r = predict_fit(load_model_spec({str(MODELS / 'moonshotai--Kimi-K2.6.json')!r}), "
        "parse_layout('TP4 EP2'), 'sglang', gpu_mem_gib=94.97); "
        "assert 'textual' not in sys.modules and 'aiohttp' not in sys.modules; print(r.verdict)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "oom"


def test_qwen2_qkv_projection_has_a_bias() -> None:
    from console.domain.fit.weights import rank_load_plan

    data = raw("Qwen--Qwen3-30B-A3B.json") | {
        "model_type": "qwen2_moe",
        "shared_expert_intermediate_size": 512,
    }
    spec = ModelSpec.from_config(data)
    names = {t.name for t in rank_load_plan(spec, Layout(), "vllm", 0) if t.layer == 0}
    assert "model.layers.0.self_attn.qkv_proj.bias" in names
    assert "model.layers.0.mlp.shared_experts.down_proj.weight" in names
