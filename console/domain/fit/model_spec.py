"""The shape of a model, read from its Hugging Face `config.json`: what the fit predictor needs.

Covers DeepSeek-V3-style MLA MoE (DeepSeek V3/R1, Kimi K2.x, also inside a multimodal wrapper's
`text_config`), Qwen2/Qwen3-MoE, Mixtral and dense Llama/Qwen/Mistral. Multi-token-prediction layers
(`num_nextn_predict_layers`) are not counted: the engines skip them unless speculative decoding is on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.domain.fit.quant import QuantSpec, quant_from_config
from console.errors import UsageError

_QKV_BIAS = ("qwen2", "qwen2_moe")
# float32 checkpoints are served in 16-bit by both engines' "auto" dtype.
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2, "auto": 2}


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What sizes a model's weights. Dimensions are in elements; `dtype_bytes` is the unquantized width.

    Attention is `mla` (DeepSeek: low-rank q and kv) or `gqa` (q/k/v heads). `moe_layers` lists the
    decoder layers whose MLP is a routed MoE; the other layers have a dense MLP of `intermediate_size`.
    """

    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype_bytes: int
    attention: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    attention_bias: bool
    qk_norm: bool
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    intermediate_size: int
    num_experts: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    moe_layers: tuple[int, ...]
    router_bias: bool
    quant: QuantSpec
    vision_params: int = 0
    max_position_embeddings: int = 0

    @property
    def is_moe(self) -> bool:
        """True when some layer routes tokens to experts."""
        return self.num_experts > 0 and bool(self.moe_layers)

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> ModelSpec:
        """Build a spec from a parsed `config.json`.

        Args:
            data: the JSON object; a multimodal wrapper's `text_config` is used for the language model.

        Returns:
            The spec.

        Raises:
            ValueError: a field is missing or has the wrong type (the message names it).
        """
        if not isinstance(data, dict):
            raise ValueError("config.json must hold a JSON object")
        text = data.get("text_config") or data.get("language_config") or data
        if not isinstance(text, dict):
            raise ValueError("text_config must be an object")
        cfg = _Fields(text)
        arch_list = data.get("architectures") or text.get("architectures") or ["unknown"]
        architecture = str(arch_list[0]) if isinstance(arch_list, list) and arch_list else "unknown"
        num_layers = cfg.int("num_hidden_layers", minimum=1)
        hidden = cfg.int("hidden_size", minimum=1)
        num_heads = cfg.int("num_attention_heads", minimum=1)
        dtype_name = str(
            text.get("torch_dtype") or text.get("dtype") or data.get("torch_dtype") or "bfloat16"
        )
        quant_cfg = text.get("quantization_config") or data.get("quantization_config")
        is_mla = "kv_lora_rank" in text and text.get("kv_lora_rank") is not None
        num_experts = cfg.int("n_routed_experts", "num_experts", "num_local_experts", default=0)
        moe_layers = _moe_layers(cfg, num_layers, num_experts)
        shared = cfg.int("n_shared_experts", default=0) * cfg.int("moe_intermediate_size", default=0)
        shared = shared or cfg.int("shared_expert_intermediate_size", default=0)
        head_dim = cfg.int("head_dim", default=0) or (hidden // num_heads)
        return cls(
            architecture=architecture,
            model_type=str(text.get("model_type") or data.get("model_type") or "unknown"),
            num_layers=num_layers,
            hidden_size=hidden,
            vocab_size=cfg.int("vocab_size", minimum=1),
            tie_word_embeddings=bool(text.get("tie_word_embeddings", data.get("tie_word_embeddings", False))),
            dtype_bytes=_DTYPE_BYTES.get(dtype_name.replace("torch.", ""), 2),
            attention="mla" if is_mla else "gqa",
            num_heads=num_heads,
            num_kv_heads=cfg.int("num_key_value_heads", default=num_heads, minimum=1),
            head_dim=head_dim,
            # Qwen2's q/k/v projections carry a bias that its config does not mention.
            attention_bias=bool(text.get("attention_bias", False)) or text.get("model_type") in _QKV_BIAS,
            qk_norm=str(text.get("model_type", "")).startswith("qwen3"),
            q_lora_rank=cfg.int("q_lora_rank", default=0) or None,
            kv_lora_rank=cfg.int("kv_lora_rank", default=0),
            qk_nope_head_dim=cfg.int("qk_nope_head_dim", default=0),
            qk_rope_head_dim=cfg.int("qk_rope_head_dim", default=0),
            v_head_dim=cfg.int("v_head_dim", default=0),
            intermediate_size=cfg.int("intermediate_size", default=4 * hidden),
            num_experts=num_experts,
            moe_intermediate_size=cfg.int("moe_intermediate_size", default=0)
            or (cfg.int("intermediate_size", default=0) if num_experts else 0),
            shared_expert_intermediate_size=shared,
            moe_layers=moe_layers,
            router_bias=text.get("topk_method") == "noaux_tc",
            quant=quant_from_config(quant_cfg),
            vision_params=_vision_params(data.get("vision_config"), hidden),
            max_position_embeddings=cfg.int("max_position_embeddings", default=0),
        )


#: A model's config.json is kilobytes; anything past this is not one (`/dev/zero` would fill memory).
MODEL_CONFIG_MAX_BYTES = 16 << 20


class ConfigTooLarge(ValueError):
    """A file named as a model config is larger than MODEL_CONFIG_MAX_BYTES."""


def read_model_config_bytes(file: Path) -> bytes:
    """The bytes of a model config, read with a size limit.

    Raises:
        OSError: it cannot be read.
        ConfigTooLarge: it is larger than MODEL_CONFIG_MAX_BYTES.
    """
    with open(file, "rb") as fh:
        data = fh.read(MODEL_CONFIG_MAX_BYTES + 1)
    if len(data) > MODEL_CONFIG_MAX_BYTES:
        raise ConfigTooLarge(f"larger than {MODEL_CONFIG_MAX_BYTES >> 20} MiB: not a model config.json")
    return data


def load_model_spec(path: str | Path) -> ModelSpec:
    """Read a model's `config.json` (or a directory holding one) into a ModelSpec.

    Raises:
        UsageError: the file is missing, not JSON, or not a model config; the message names the file.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        text = read_model_config_bytes(file).decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{file}: no such model config") from None
    except ConfigTooLarge as exc:
        raise UsageError(f"{file}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: cannot read model config: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{file}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return ModelSpec.from_config(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{file}: not a supported model config: {exc}") from None


class _Fields:
    """Typed access to config fields, with one-line errors naming the field."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def int(self, *names: str, default: int | None = None, minimum: int = 0) -> int:
        for name in names:
            value = self.data.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
            return value
        if default is None:
            raise ValueError(f"missing {names[0]}")
        return default


def _moe_layers(cfg: _Fields, num_layers: int, num_experts: int) -> tuple[int, ...]:
    """Which decoder layers are MoE, by each family's own rule."""
    if num_experts == 0:
        return ()
    data = cfg.data
    if "first_k_dense_replace" in data or "moe_layer_freq" in data:  # DeepSeek, Kimi
        first_dense = cfg.int("first_k_dense_replace", default=0)
        freq = cfg.int("moe_layer_freq", default=1) or 1
        return tuple(i for i in range(num_layers) if i >= first_dense and i % freq == 0)
    if "decoder_sparse_step" in data or "mlp_only_layers" in data:  # Qwen2/Qwen3-MoE
        step = cfg.int("decoder_sparse_step", default=1) or 1
        dense_only = data.get("mlp_only_layers") or []
        if not isinstance(dense_only, list):
            raise ValueError("mlp_only_layers must be a list")
        return tuple(i for i in range(num_layers) if i not in dense_only and (i + 1) % step == 0)
    return tuple(range(num_layers))  # Mixtral: every layer


def _vision_params(vision: Any, text_hidden: int) -> int:
    """Parameter count of a vision tower plus its projector (an estimate from the config's sizes).

    Kimi K2.5/K2.6 (MoonViT, `vt_*` keys): per block fused qkv, out proj and a two-layer MLP, all with
    biases, two layer norms; learned 2-D position embeddings; a 2x2 patch-merging projector.
    """
    if not isinstance(vision, dict):
        return 0
    hidden = vision.get("vt_hidden_size") or vision.get("hidden_size")
    layers = vision.get("vt_num_hidden_layers") or vision.get("num_hidden_layers") or vision.get("depth")
    inter = vision.get("vt_intermediate_size") or vision.get("intermediate_size")
    if not all(isinstance(v, int) and v > 0 for v in (hidden, layers, inter)):
        return 0
    block = 4 * hidden * hidden + 4 * hidden + 2 * hidden * inter + inter + hidden + 4 * hidden
    patch = vision.get("patch_size", 14) if isinstance(vision.get("patch_size"), int) else 14
    pos = 1
    for key in ("init_pos_emb_height", "init_pos_emb_width"):
        pos *= vision.get(key) if isinstance(vision.get(key), int) else 1
    embed = 3 * patch * patch * hidden + hidden + pos * hidden
    merge = vision.get("merge_kernel_size")
    valid_merge = isinstance(merge, list) and len(merge) == 2 and all(isinstance(m, int) for m in merge)
    merge_n = merge[0] * merge[1] if valid_merge else 4
    merged = hidden * merge_n
    projector = 2 * hidden + merged * merged + merged + merged * text_hidden + text_hidden
    return embed + layers * block + 2 * hidden + projector
