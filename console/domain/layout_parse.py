"""Reading a layout's spellings (`TP4 EP2`, `tp=4,ep=2`, engine command lines) into its parts.

`console.domain.layout.parse_layout` builds the engine-neutral `Layout` from what this reads.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass


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


@dataclass(frozen=True, slots=True)
class LayoutText:
    """What a layout text says, before `parse_layout` builds a `Layout` from it.

    Attributes:
        sizes: The sizes it names, by Layout field (`tp`, `ep`, `pp`, `dp`).
        dp_attention: It turns on DP attention.
        vllm_ep: It carries vLLM's `--enable-expert-parallel` (EP = TP x DP).
        extra_args: Flags it does not know, with their values, in order.
    """

    sizes: dict[str, int]
    dp_attention: bool
    vllm_ep: bool
    extra_args: tuple[str, ...]


def read_layout_text(text: str) -> LayoutText:
    """Read the parts of a layout text, in any spelling `parse_layout` lists.

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
    return LayoutText(sizes, dp_attention=dp_attention, vllm_ep=vllm_ep, extra_args=tuple(extra))


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
