"""A parallelism layout (TP/EP/PP/DP) and the engine rules around it."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from console.domain.models import Engine


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


class LayoutError(ValueError):
    """A layout string that cannot be read; the message is one line."""


#: Sizes above this are typos, not clusters.
MAX_PARALLEL_SIZE = 4096

# Engine flags that carry a size, by the Layout field they set.
_SIZE_FLAGS = {
    "--tp-size": "tp",
    "--tp": "tp",
    "--tensor-parallel-size": "tp",
    "-tp": "tp",
    "--ep-size": "ep",
    "--ep": "ep",
    "--expert-parallel-size": "ep",
    "--pp-size": "pp",
    "--pp": "pp",
    "--pipeline-parallel-size": "pp",
    "-pp": "pp",
    "--dp-size": "dp",
    "--dp": "dp",
    "--data-parallel-size": "dp",
    "-dp": "dp",
}
_VLLM_EP_FLAG = "--enable-expert-parallel"
_SGLANG_EP_MOE_FLAG = "--enable-ep-moe"  # deprecated SGLang spelling of --ep-size = --tp-size
_DPA_FLAGS = ("--enable-dp-attention", "--enable-dp-attn")
_DPA_WORDS = ("dpa", "dp-attention", "dp_attention")
# `TP4`, `tp4ep2`, `TP 4`; and `tp=4`, `ep:2`.
_SHORT = re.compile(r"(tp|ep|pp|dp)(\d+)", re.IGNORECASE)
_KEYVAL = re.compile(r"^(tp|ep|pp|dp)\s*[=:]\s*(\S+)$", re.IGNORECASE)
_PROGRAM_WORDS = {"python", "python3", "-m", "sglang.launch_server", "vllm.entrypoints.openai.api_server"}


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
    if not isinstance(text, str):
        raise LayoutError(f"a layout is text, not {type(text).__name__}")
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise LayoutError(f"cannot split layout {_show(text)}: {exc}") from None
    tokens = _drop_program(tokens)
    if not tokens:
        raise LayoutError("empty layout: expected something like TP8, TP4 EP2 or --tp-size 4")
    sizes: dict[str, int] = {}
    dp_attention = False
    vllm_ep = False
    ep_moe = False
    extra: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag, _, inline = token.partition("=") if token.startswith("-") else (token, "", "")
        if token.startswith("-") and flag in _SIZE_FLAGS:
            if inline:
                value = inline
            elif i + 1 < len(tokens):
                i += 1
                value = tokens[i]
            else:
                raise LayoutError(f"{flag} needs a value")
            _set_size(sizes, _SIZE_FLAGS[flag], value, flag)
        elif token == _VLLM_EP_FLAG:
            vllm_ep = True
        elif token == _SGLANG_EP_MOE_FLAG:
            ep_moe = True
        elif token in _DPA_FLAGS:
            dp_attention = True
        elif token.startswith("-") and len(token) > 1 and not _is_number(token):
            extra.append(token)
            # An unknown flag owns the plain word after it (its value), unless that word is a layout part.
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("-") and not _is_short(tokens[i + 1]):
                i += 1
                extra.append(tokens[i])
        else:
            dp_attention = _read_parts(token, sizes) or dp_attention
        i += 1
    if ep_moe and "ep" not in sizes:
        sizes["ep"] = sizes.get("tp", 1)
    return _build(sizes, dp_attention=dp_attention, vllm_ep=vllm_ep, extra=tuple(extra))


def _drop_program(tokens: list[str]) -> list[str]:
    """Skip a leading `python -m sglang.launch_server` or `vllm serve MODEL`."""
    if len(tokens) >= 2 and tokens[0] == "vllm" and tokens[1] == "serve":
        rest = tokens[2:]
        return rest[1:] if rest and not rest[0].startswith("-") else rest
    i = 0
    while i < len(tokens) and tokens[i] in _PROGRAM_WORDS:
        i += 1
    return tokens[i:]


def _read_parts(token: str, sizes: dict[str, int]) -> bool:
    """Read a word of comma-separated layout parts (`tp=4,ep=2`); True when one names DP attention."""
    dp_attention = False
    for part in token.split(","):
        if part:
            dp_attention = _read_short(part, sizes) or dp_attention
    return dp_attention


def _read_short(token: str, sizes: dict[str, int]) -> bool:
    """Read `TP4`, `TP4EP2`, `TP8DP8DPA` or `tp=4` into `sizes`; True when it names DP attention."""
    keyval = _KEYVAL.match(token)
    if keyval:
        _set_size(sizes, keyval.group(1).lower(), keyval.group(2), token)
        return False
    if token.lower() in _DPA_WORDS:
        return True
    body = token
    dp_attention = token.lower().endswith("dpa")
    if dp_attention:
        body = token[:-3]
    pos = 0
    matched = False
    for match in _SHORT.finditer(body):
        if match.start() != pos:
            break
        _set_size(sizes, match.group(1).lower(), match.group(2), token)
        pos = match.end()
        matched = True
    if not matched or pos != len(body):
        raise LayoutError(
            f"not a layout part: {_show(token)} (expected e.g. TP8, EP8, PP8, DP8, DPA, --tp-size 8)"
        )
    return dp_attention


def _set_size(sizes: dict[str, int], key: str, value: str, where: str) -> None:
    if not value.isascii() or not value.isdigit():
        raise LayoutError(f"{_show(where)}: {key} must be a whole number, got {_show(value)}")
    number = int(value)
    if not 1 <= number <= MAX_PARALLEL_SIZE:
        raise LayoutError(f"{_show(where)}: {key} must be between 1 and {MAX_PARALLEL_SIZE}, got {number}")
    if key in sizes and sizes[key] != number:
        raise LayoutError(f"{key} given twice: {sizes[key]} and {number}")
    sizes[key] = number


def _build(sizes: dict[str, int], *, dp_attention: bool, vllm_ep: bool, extra: tuple[str, ...]) -> Layout:
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


def _is_short(token: str) -> bool:
    try:
        _read_parts(token, {})
    except LayoutError:
        return False
    return True


def _is_number(token: str) -> bool:
    return token[1:].replace(".", "", 1).isdigit()


def _show(text: str) -> str:
    """A short, one-line rendering of user text for error messages."""
    shown = text if len(text) <= 40 else text[:37] + "..."
    return repr(shown)


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
