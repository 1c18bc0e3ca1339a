"""Quantization formats and the tensors each one allocates, shaped the way SGLang and vLLM shape them.

- unquantized: one weight in the model dtype (bf16/fp16).
- fp8 with block scales (`weight_block_size` [128, 128]): fp8 weight plus a float32 `weight_scale_inv`
  of ceil(out/128) x ceil(in/128); MoE layers hold `w13_weight_scale_inv`/`w2_weight_scale_inv`.
- fp8 per tensor: fp8 weight plus one float32 scale.
- compressed-tensors `pack-quantized` (int4/int8, group size g): `weight_packed` int32 holding
  32/bits values each, a `weight_scale` in the model dtype per group, and a `weight_shape`; MoE layers
  also hold the GPTQ-style `g_idx` and sort-index tensors (int32) the Marlin kernels want.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FP32_BYTES = 4
INT32_BYTES = 4


@dataclass(frozen=True, slots=True)
class QuantSpec:
    """A checkpoint's weight quantization.

    `method` is `none`, `fp8` or `int` (packed integer weights). `skip` lists module names or
    `re:` patterns that stay unquantized (fp8's `modules_to_not_convert`, compressed-tensors' `ignore`).
    """

    method: str = "none"
    block_n: int | None = None
    block_k: int | None = None
    bits: int = 16
    group_size: int | None = None
    skip: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """A short human name: `bf16`, `fp8 block 128x128`, `int4 g32`."""
        if self.method == "fp8":
            return f"fp8 block {self.block_n}x{self.block_k}" if self.block_n else "fp8"
        if self.method == "int":
            return f"int{self.bits} g{self.group_size}" if self.group_size else f"int{self.bits}"
        return "bf16"

    def is_skipped(self, module: str) -> bool:
        """True when a module (HF name, e.g. `model.layers.3.self_attn.q_a_proj`) stays unquantized."""
        if self.method == "none":
            return True
        for entry in self.skip:
            if entry.startswith("re:"):
                try:
                    if re.match(entry[3:], module):
                        return True
                except re.error:
                    continue
            elif module == entry or module.startswith(entry + "."):
                return True
        return False


def quant_from_config(cfg: Any) -> QuantSpec:
    """Read a `quantization_config` block (or None for unquantized).

    Raises:
        ValueError: a quantization method the predictor does not model.
    """
    if not cfg:
        return QuantSpec()
    if not isinstance(cfg, dict):
        raise ValueError("quantization_config must be an object")
    method = str(cfg.get("quant_method", "")).lower()
    if method == "fp8":
        block = cfg.get("weight_block_size")
        skip = _names(cfg.get("modules_to_not_convert"), "modules_to_not_convert")
        if block is None:
            return QuantSpec(method="fp8", bits=8, skip=skip)
        if not (isinstance(block, list) and len(block) == 2 and all(_pos_int(b) for b in block)):
            raise ValueError(f"weight_block_size must be two positive integers, got {block!r}")
        return QuantSpec(method="fp8", block_n=block[0], block_k=block[1], bits=8, skip=skip)
    if method == "compressed-tensors":
        return _compressed_tensors(cfg)
    raise ValueError(
        f"quantization {method or '(unnamed)'!r} is not modelled (bf16, fp8, compressed-tensors)"
    )


def _compressed_tensors(cfg: dict[str, Any]) -> QuantSpec:
    fmt = cfg.get("format")
    groups = cfg.get("config_groups") or {}
    if fmt != "pack-quantized" or not isinstance(groups, dict) or not groups:
        raise ValueError(f"compressed-tensors format {fmt!r} is not modelled (pack-quantized only)")
    first = next(iter(groups.values()))
    weights = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(weights, dict):
        raise ValueError("compressed-tensors config group has no weights block")
    bits = weights.get("num_bits")
    group = weights.get("group_size")
    if bits not in (4, 8):
        raise ValueError(f"pack-quantized num_bits must be 4 or 8, got {bits!r}")
    if weights.get("strategy") == "group" and not _pos_int(group):
        raise ValueError(f"pack-quantized group_size must be a positive integer, got {group!r}")
    skip = _names(cfg.get("ignore"), "ignore")
    return QuantSpec(method="int", bits=bits, group_size=group if _pos_int(group) else None, skip=skip)


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{field} must be a list of module names")
    return tuple(str(m) for m in value)


def _pos_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def linear_tensors(
    quant: QuantSpec,
    module: str,
    out_features: int,
    in_features: int,
    dtype_bytes: int,
    *,
    bias: bool = False,
) -> list[tuple[str, int]]:
    """The tensors one (already sharded) linear layer allocates, as (name, bytes) in creation order."""
    tensors: list[tuple[str, int]] = []
    if quant.is_skipped(module):
        tensors.append((f"{module}.weight", out_features * in_features * dtype_bytes))
    elif quant.method == "fp8":
        tensors.append((f"{module}.weight", out_features * in_features))
        if quant.block_n and quant.block_k:
            scales = _ceil(out_features, quant.block_n) * _ceil(in_features, quant.block_k)
            tensors.append((f"{module}.weight_scale_inv", scales * FP32_BYTES))
        else:
            tensors.append((f"{module}.weight_scale", FP32_BYTES))
    else:
        tensors.append((f"{module}.weight_packed", out_features * in_features * quant.bits // 8))
        groups = _ceil(in_features, quant.group_size) if quant.group_size else 1
        tensors.append((f"{module}.weight_scale", out_features * groups * dtype_bytes))
        tensors.append((f"{module}.weight_shape", 2 * 8))
    if bias:
        tensors.append((f"{module}.bias", out_features * dtype_bytes))
    return tensors


def moe_tensors(
    quant: QuantSpec, module: str, experts: int, inter: int, hidden: int, dtype_bytes: int
) -> list[tuple[str, int]]:
    """The fused expert tensors of one MoE layer on one rank, in creation order.

    Args:
        quant: the checkpoint's quantization.
        module: the experts module name (`model.layers.5.mlp.experts`).
        experts: experts held on this rank.
        inter: each expert's intermediate size on this rank (after any tensor split).
        hidden: the model's hidden size.
        dtype_bytes: the unquantized dtype's width.
    """
    if quant.is_skipped(f"{module}.0.down_proj"):
        return [
            (f"{module}.w13_weight", experts * 2 * inter * hidden * dtype_bytes),
            (f"{module}.w2_weight", experts * hidden * inter * dtype_bytes),
        ]
    if quant.method == "fp8":
        tensors = [
            (f"{module}.w13_weight", experts * 2 * inter * hidden),
            (f"{module}.w2_weight", experts * hidden * inter),
        ]
        if quant.block_n and quant.block_k:
            w13_scales = 2 * _ceil(inter, quant.block_n) * _ceil(hidden, quant.block_k)
            w2_scales = _ceil(hidden, quant.block_n) * _ceil(inter, quant.block_k)
            tensors += [
                (f"{module}.w13_weight_scale_inv", experts * w13_scales * FP32_BYTES),
                (f"{module}.w2_weight_scale_inv", experts * w2_scales * FP32_BYTES),
            ]
        else:
            tensors += [
                (f"{module}.w13_weight_scale", experts * 2 * FP32_BYTES),
                (f"{module}.w2_weight_scale", experts * FP32_BYTES),
            ]
        return tensors
    # Packed int: weights are stored transposed, packed along the input dimension into int32.
    pack = 32 // quant.bits
    group = quant.group_size or hidden
    return [
        (f"{module}.w13_weight_packed", experts * (hidden // pack) * 2 * inter * INT32_BYTES),
        (f"{module}.w2_weight_packed", experts * (inter // pack) * hidden * INT32_BYTES),
        (f"{module}.w13_weight_scale", experts * _ceil(hidden, group) * 2 * inter * dtype_bytes),
        (f"{module}.w2_weight_scale", experts * _ceil(inter, group) * hidden * dtype_bytes),
        # (experts, 2) made with the default dtype, which is the model dtype during model init.
        (f"{module}.w2_weight_shape", experts * 2 * dtype_bytes),
        (f"{module}.w13_weight_shape", experts * 2 * dtype_bytes),
        (f"{module}.w13_weight_g_idx", experts * hidden * INT32_BYTES),
        (f"{module}.w2_weight_g_idx", experts * inter * INT32_BYTES),
        (f"{module}.w13_g_idx_sort_indices", experts * hidden * INT32_BYTES),
        (f"{module}.w2_g_idx_sort_indices", experts * inter * INT32_BYTES),
    ]
