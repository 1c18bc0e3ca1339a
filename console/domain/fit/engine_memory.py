"""How each engine budgets GPU memory around the weights: start-up overhead, the static share, the KV pool.

SGLang (`server_args.py`, 0.5.x): `--mem-fraction-static` f is the share of the memory free before
loading that weights plus the KV pool may use; the KV pool gets `free_before_load x f - weights`. Its
auto default reserves, in MiB, 512 + 1.5 x chunked_prefill_size + 2 x cuda_graph_max_bs
+ tp x pp / 8 x 1024 (+ DP-attention padding), at least 10 GiB on GPUs over 60 GiB, then
f = round((gpu_mem - reserved) / gpu_mem, 3); multimodal models (a `vision_config`) get f x 0.95 more
for the vision tower's activations. gpu_mem is nvidia-smi's total in MiB.

vLLM: `--gpu-memory-utilization` u (default 0.9) of the total holds weights, the profiled activation
peak, non-torch memory (CUDA context, NCCL) and the KV pool; the pool must hold one request of
`--max-model-len` (default: the model's max_position_embeddings), or vLLM refuses to start.

The CUDA context, NCCL buffers and activation figures are estimates (documented constants below),
good to a few hundred MiB; the weights are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.fit.model_spec import ModelSpec
from console.domain.fit.sharding import kv_heads_per_rank
from console.domain.layout import Layout
from console.domain.sizes import GIB, MIB
from console.domain.values import Engine

#: CUDA context, cuBLAS workspace and allocator slack of one rank before anything is loaded.
CUDA_CONTEXT_GIB = 0.75
#: NCCL communicators and custom all-reduce buffers when a rank has peers.
NCCL_BUFFERS_GIB = 0.25
#: vLLM's default `--gpu-memory-utilization`.
VLLM_DEFAULT_UTILIZATION = 0.9
#: vLLM's default token budget per step for the OpenAI server (sizes the profiled activation peak).
VLLM_DEFAULT_BATCHED_TOKENS = 8192
#: nvidia-smi's total minus the driver's reservation, as a share: 97887 MiB cards show 94.97 GiB in
#: PyTorch (calibrated on that card; other cards differ by a few hundred MiB).
TORCH_VISIBLE_SHARE = 0.99348
#: SGLang's multimodal reduction of the auto mem fraction (adjust_mem_fraction_for_vlm's base ratio).
SGLANG_VLM_FACTOR = 0.95


def torch_capacity_bytes(nvidia_smi_total_mib: int) -> int:
    """The total capacity PyTorch reports for a card nvidia-smi lists as `nvidia_smi_total_mib` MiB.

    97887 MiB (RTX PRO 6000 96 GB) -> 94.97 GiB, as in the story's OOM message.
    """
    return round(nvidia_smi_total_mib * MIB * TORCH_VISIBLE_SHARE)


def smi_total_mib(torch_capacity: int) -> int:
    """The inverse of `torch_capacity_bytes`: nvidia-smi's MiB for a PyTorch capacity in bytes."""
    return round(torch_capacity / MIB / TORCH_VISIBLE_SHARE)


@dataclass(frozen=True, slots=True)
class EngineKnobs:
    """Engine flags that change the memory budget, read from a layout's extra args."""

    mem_fraction: float | None = None
    max_model_len: int | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    max_num_batched_tokens: int | None = None


_KNOB_FLAGS = {
    "--mem-fraction-static": ("mem_fraction", float),
    "--gpu-memory-utilization": ("mem_fraction", float),
    "--max-model-len": ("max_model_len", int),
    "--context-length": ("max_model_len", int),
    "--chunked-prefill-size": ("chunked_prefill_size", int),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", int),
    "--max-num-batched-tokens": ("max_num_batched_tokens", int),
}


def knobs_from_args(args: tuple[str, ...] | list[str]) -> EngineKnobs:
    """Read the memory-relevant flags (`--mem-fraction-static 0.85`, `--max-model-len=32768`, ...)."""
    values: dict[str, float | int] = {}
    items = list(args)
    for i, token in enumerate(items):
        flag, eq, inline = token.partition("=")
        if flag not in _KNOB_FLAGS:
            continue
        raw = inline if eq else (items[i + 1] if i + 1 < len(items) else "")
        field, kind = _KNOB_FLAGS[flag]
        try:
            values[field] = kind(raw)
        except ValueError:
            continue
    return EngineKnobs(**values)


def startup_overhead_bytes(world_size: int) -> int:
    """Memory a rank uses before loading: CUDA context, plus NCCL buffers when it has peers."""
    gib = CUDA_CONTEXT_GIB + (NCCL_BUFFERS_GIB if world_size > 1 else 0.0)
    return round(gib * GIB)


def sglang_default_mem_fraction(
    spec: ModelSpec, layout: Layout, gpu_total_mib: int, knobs: EngineKnobs | None = None
) -> float:
    """SGLang's auto `--mem-fraction-static` for this GPU, layout and model."""
    knobs = knobs or EngineKnobs()
    gpu_mem = gpu_total_mib
    if gpu_mem < 35 * 1024:
        chunk, graph_bs = 2048, (24 if layout.tp < 4 else 80)
    elif gpu_mem < 60 * 1024:
        chunk, graph_bs = 4096, (32 if layout.tp < 4 else 160)
    elif gpu_mem < 160 * 1024:
        chunk, graph_bs = 8192, (256 if layout.tp < 4 else 512)
    else:
        chunk, graph_bs = 16384, 512
    chunk = knobs.chunked_prefill_size or chunk
    graph_bs = knobs.cuda_graph_max_bs or graph_bs
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + layout.tp * layout.pp / 8 * 1024
    if layout.dp_attention:
        reserved += graph_bs * layout.dp * 3
        if graph_bs > 300:
            reserved += graph_bs * layout.dp * 1.5
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((gpu_mem - reserved) / gpu_mem, 3)
    if spec.vision_params:
        fraction *= SGLANG_VLM_FACTOR
    return fraction


def vllm_activation_bytes(spec: ModelSpec, layout: Layout, knobs: EngineKnobs | None = None) -> int:
    """vLLM's profiled activation peak for one step of max_num_batched_tokens (an estimate).

    Hidden states, residual, q/k/v and attention output take about 8 x hidden values per token; the MLP
    adds its gate/up output (2 x its width on this rank). bf16 values.
    """
    knobs = knobs or EngineKnobs()
    tokens = knobs.max_num_batched_tokens or VLLM_DEFAULT_BATCHED_TOKENS
    if spec.is_moe:
        ffn = spec.moe_intermediate_size * 8 // max(1, layout.tp)  # routed top-k (about 8) experts' width
    else:
        ffn = spec.intermediate_size // max(1, layout.tp)
    return tokens * 2 * (8 * spec.hidden_size + 2 * ffn)


def kv_bytes_per_token(spec: ModelSpec, layers_on_rank: int, attn_tp: int) -> int:
    """KV-cache bytes one token takes on one rank (bf16 cache).

    MLA caches one latent (kv_lora_rank + rope dims) per layer, the same on every TP rank; GQA caches
    K and V for this rank's K/V heads.
    """
    if spec.attention == "mla":
        per_layer = (spec.kv_lora_rank + spec.qk_rope_head_dim) * 2
    else:
        per_layer = 2 * kv_heads_per_rank(spec, max(1, attn_tp)) * spec.head_dim * 2
    return per_layer * layers_on_rank


def engine_of(engine: Engine | str) -> Engine:
    """The engine whose memory rules apply (an OpenAI-compatible server is planned like vLLM)."""
    engine = Engine(engine)
    return Engine.VLLM if engine is Engine.OPENAI else engine
