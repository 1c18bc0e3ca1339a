"""A parallelism layout (TP/EP/PP/DP) and the engine rules around it."""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.layout_parse import LayoutError, LayoutText, read_layout_text
from console.domain.values import Engine

__all__ = [
    "Layout",
    "LayoutError",
    "attention_tp",
    "check_layout",
    "engine_args",
    "gpus_used",
    "parse_layout",
    "sglang_args",
    "vllm_args",
]


@dataclass(frozen=True, slots=True)
class Layout:
    """A parallelism layout, engine-neutral.

    `ep` is the expert-parallel size as SGLang's `--ep-size` spells it; for vLLM's
    `--enable-expert-parallel` it is tp x dp. `extra_args` are engine flags passed through unchanged.
    """

    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp: int = 1
    dp_attention: bool = False
    extra_args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """Canonical short name: `TP8`, `TP8 EP8`, `PP8`, `TP4 EP2`, `TP8 DP8 DPA`."""
        parts = []
        if self.tp > 1 or (self.pp == 1 and self.dp == 1):
            parts.append(f"TP{self.tp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        if self.dp_attention:
            parts.append("DPA")
        return " ".join(parts)


def parse_layout(text: str) -> Layout:
    """Read a layout from its common spellings.

    Accepts `TP8`, `EP8` (TP8 with EP8, the way SGLang runs `--tp-size 8 --ep-size 8`), `PP8`,
    `TP4 EP2`, `TP4EP2`, `tp=4,ep=2`, `DP8`, `DPA`, and engine command lines (`--tp-size 4 --ep-size 2`,
    `--tensor-parallel-size 4 --enable-expert-parallel`, `-tp 4 -dp 2`). vLLM's
    `--enable-expert-parallel` sets ep = tp x dp. Flags this parser does not know are kept, with
    their values, in `extra_args`.

    Args:
        text: the layout as a user or a unit file writes it.

    Returns:
        The layout.

    Raises:
        LayoutError: the text is not a layout (one-line reason).
    """
    return _build(read_layout_text(text))


def _build(text: LayoutText) -> Layout:
    """The engine-neutral layout a text's parts describe (`EP8` alone is TP8 EP8)."""
    sizes, dp_attention, vllm_ep, extra = text.sizes, text.dp_attention, text.vllm_ep, text.extra_args
    if not sizes and not dp_attention and not vllm_ep:
        if extra:
            return Layout(extra_args=extra)
        raise LayoutError("no parallel sizes in layout")
    tp = sizes.get("tp")
    dp = sizes.get("dp", 1)
    ep = sizes.get("ep", 1)
    if tp is None:
        # `EP8` alone is TP8 EP8 (SGLang carves EP out of TP); with DP it is DP's own EP (vLLM).
        tp = ep if ("ep" in sizes and "dp" not in sizes) else 1
    if vllm_ep:
        if "ep" in sizes and sizes["ep"] != tp * dp:
            raise LayoutError(
                f"--enable-expert-parallel makes EP = TP x DP = {tp * dp}, but EP {sizes['ep']} was given"
            )
        ep = tp * dp
    return Layout(tp=tp, ep=ep, pp=sizes.get("pp", 1), dp=dp, dp_attention=dp_attention, extra_args=extra)


def sglang_args(layout: Layout) -> list[str]:
    """SGLang's flags for a layout (`--tp-size 4 --ep-size 2 ...`), then the extra args."""
    args = ["--tp-size", str(layout.tp)]
    if layout.ep > 1:
        args += ["--ep-size", str(layout.ep)]
    if layout.pp > 1:
        args += ["--pp-size", str(layout.pp)]
    if layout.dp > 1:
        args += ["--dp-size", str(layout.dp)]
    if layout.dp_attention:
        args.append("--enable-dp-attention")
    return args + list(layout.extra_args)


def vllm_args(layout: Layout) -> list[str]:
    """vLLM's flags for a layout; EP becomes `--enable-expert-parallel` (vLLM's EP is always tp x dp).

    vLLM has no separate dp-attention switch: its data parallelism of an MoE model already is.
    """
    args = ["--tensor-parallel-size", str(layout.tp)]
    if layout.pp > 1:
        args += ["--pipeline-parallel-size", str(layout.pp)]
    if layout.dp > 1:
        args += ["--data-parallel-size", str(layout.dp)]
    if layout.ep > 1:
        args.append("--enable-expert-parallel")
    return args + list(layout.extra_args)


def engine_args(layout: Layout, engine: Engine | str) -> list[str]:
    """The layout's flags for an engine; an OpenAI-compatible server gets vLLM-style flags."""
    return sglang_args(layout) if Engine(engine) is Engine.SGLANG else vllm_args(layout)


def gpus_used(layout: Layout, engine: Engine | str) -> int:
    """How many GPUs a layout occupies under an engine's rules.

    SGLang: world = tp x pp, EP is carved out of TP, DP attention runs inside the TP group, and
    `--dp-size` without DP attention starts that many replicas. vLLM: tp x pp x dp.
    """
    if Engine(engine) is Engine.SGLANG:
        replicas = 1 if layout.dp_attention else layout.dp
        return layout.tp * layout.pp * replicas
    return layout.tp * layout.pp * layout.dp


def attention_tp(layout: Layout, engine: Engine | str) -> int:
    """The tensor-parallel size attention weights are split over (SGLang DP attention shrinks it)."""
    if Engine(engine) is Engine.SGLANG and layout.dp_attention and layout.dp > 1:
        return max(1, layout.tp // layout.dp)
    return layout.tp


def check_layout(
    layout: Layout,
    engine: Engine | str,
    *,
    num_experts: int | None = None,
    gpu_count: int | None = None,
) -> str | None:
    """Say why a layout cannot run, or None when it can.

    Args:
        layout: the layout.
        engine: `sglang`, `vllm` or `openai` (no engine rules beyond the GPU count).
        num_experts: routed experts per MoE layer, when the model is known.
        gpu_count: GPUs on the host, when known.

    Returns:
        A one-line reason, or None.
    """
    engine = Engine(engine)
    for key in ("tp", "ep", "pp", "dp"):
        if getattr(layout, key) < 1:
            return f"{key} must be at least 1, got {getattr(layout, key)}"
    if engine is Engine.SGLANG:
        if layout.tp % layout.ep:
            return f"--ep-size {layout.ep} must divide --tp-size {layout.tp} (SGLang carves EP out of TP)"
        if layout.dp_attention:
            if layout.dp < 2:
                return "--enable-dp-attention needs --dp-size of 2 or more"
            if layout.tp % layout.dp:
                return f"--dp-size {layout.dp} must divide --tp-size {layout.tp} with --enable-dp-attention"
    elif engine is Engine.VLLM:
        if layout.ep not in (1, layout.tp * layout.dp):
            return (
                f"vLLM's expert parallel size is TP x DP = {layout.tp * layout.dp}; "
                f"EP {layout.ep} cannot be expressed with --enable-expert-parallel"
            )
    if num_experts is not None and num_experts > 0 and layout.ep > 1 and num_experts % layout.ep:
        return f"{num_experts} experts are not divisible by EP {layout.ep}"
    needed = gpus_used(layout, engine)
    if gpu_count is not None and needed > gpu_count:
        return f"{layout.name} needs {needed} GPUs under {engine.value}, the host has {gpu_count}"
    return None
