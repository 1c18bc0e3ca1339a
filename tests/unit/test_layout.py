"""Layouts: the spellings users and unit files write, rendering to engine flags, and engine rules."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.layout import (
    Layout,
    LayoutError,
    check_layout,
    engine_args,
    gpus_used,
    parse_layout,
    sglang_args,
    vllm_args,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TP8", Layout(tp=8)),
        ("EP8", Layout(tp=8, ep=8)),
        ("PP8", Layout(pp=8)),
        ("DP8", Layout(dp=8)),
        ("TP4 EP2", Layout(tp=4, ep=2)),
        ("TP4EP2", Layout(tp=4, ep=2)),
        ("tp4ep2", Layout(tp=4, ep=2)),
        ("tp=4,ep=2", Layout(tp=4, ep=2)),
        ("tp=4, ep=2", Layout(tp=4, ep=2)),
        ("TP4 , EP2", Layout(tp=4, ep=2)),
        ("EP2 TP4", Layout(tp=4, ep=2)),
        ("TP2 PP4", Layout(tp=2, pp=4)),
        ("TP8 DP8 DPA", Layout(tp=8, dp=8, dp_attention=True)),
        ("EP2 DP2", Layout(tp=1, ep=2, dp=2)),
        ("tp8dp8dpa", Layout(tp=8, dp=8, dp_attention=True)),
        ("TP8 DP8 dp-attention", Layout(tp=8, dp=8, dp_attention=True)),
    ],
)
def test_short_spellings(text: str, expected: Layout) -> None:
    assert parse_layout(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--tp-size 4 --ep-size 2", Layout(tp=4, ep=2)),
        ("--tp-size=4 --ep-size=2", Layout(tp=4, ep=2)),
        ("--tp 4", Layout(tp=4)),
        ("--tensor-parallel-size 8 --expert-parallel-size 8", Layout(tp=8, ep=8)),
        ("--tp-size 8 --ep 4", Layout(tp=8, ep=4)),
        ("--pp-size 8", Layout(pp=8)),
        ("--tp-size 8 --dp-size 8 --enable-dp-attention", Layout(tp=8, dp=8, dp_attention=True)),
        ("--tp 8 --dp 2", Layout(tp=8, dp=2)),
        ("--tp 8 --enable-ep-moe", Layout(tp=8, ep=8)),
    ],
)
def test_sglang_flags(text: str, expected: Layout) -> None:
    assert parse_layout(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--tensor-parallel-size 4 --enable-expert-parallel", Layout(tp=4, ep=4)),
        ("-tp 4", Layout(tp=4)),
        ("-tp 2 -dp 4 --enable-expert-parallel", Layout(tp=2, ep=8, dp=4)),
        ("--enable-expert-parallel -tp 2 -dp 4", Layout(tp=2, ep=8, dp=4)),
        ("--pipeline-parallel-size 2 -tp 4", Layout(tp=4, pp=2)),
        ("-pp 2", Layout(pp=2)),
        ("--data-parallel-size 2 --tensor-parallel-size 4", Layout(tp=4, dp=2)),
    ],
)
def test_vllm_flags(text: str, expected: Layout) -> None:
    assert parse_layout(text) == expected


def test_unknown_flags_and_their_values_go_to_extra_args() -> None:
    layout = parse_layout(
        "--model-path /models/k26 --tp-size 8 --trust-remote-code --mem-fraction-static 0.85"
    )
    assert (layout.tp, layout.ep) == (8, 1)
    assert layout.extra_args == (
        "--model-path",
        "/models/k26",
        "--trust-remote-code",
        "--mem-fraction-static",
        "0.85",
    )


def test_commas_inside_flag_values_are_kept() -> None:
    layout = parse_layout("--tp-size 8 --cuda-graph-bs 1,2,4")
    assert layout.extra_args == ("--cuda-graph-bs", "1,2,4")
    assert parse_layout("--trust-remote-code tp=4,ep=2") == Layout(
        tp=4, ep=2, extra_args=("--trust-remote-code",)
    )


def test_an_unknown_flag_does_not_swallow_a_layout_part() -> None:
    layout = parse_layout("--trust-remote-code TP8")
    assert layout.tp == 8
    assert layout.extra_args == ("--trust-remote-code",)


@pytest.mark.parametrize(
    "text",
    [
        "python3 -m sglang.launch_server --model-path /m --tp 8 --ep-size 8",
        "vllm serve moonshotai/Kimi-K2.6 --tensor-parallel-size 8 --enable-expert-parallel",
    ],
)
def test_whole_command_lines(text: str) -> None:
    layout = parse_layout(text)
    assert (layout.tp, layout.ep) == (8, 8)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("TP", "not a layout part"),
        ("TP0", "between 1 and"),
        ("TP99999", "between 1 and"),
        ("TP4 TP8", "tp given twice"),
        ("banana", "not a layout part"),
        ("TP4EPx", "not a layout part"),
        ("--tp-size", "needs a value"),
        ("--tp-size four", "whole number"),
        ("tp=-1", "whole number"),
        ('TP4 "EP2', "cannot split"),
        ("-tp 4 --ep-size 2 --enable-expert-parallel", "--enable-expert-parallel makes EP"),
    ],
)
def test_bad_layouts_raise_layout_error_with_one_line(text: str, words: str) -> None:
    with pytest.raises(LayoutError) as info:
        parse_layout(text)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_layout_error_is_a_value_error() -> None:
    assert issubclass(LayoutError, ValueError)


def test_render_sglang_and_vllm_flags() -> None:
    layout = Layout(tp=4, ep=2, extra_args=("--trust-remote-code",))
    assert sglang_args(layout) == ["--tp-size", "4", "--ep-size", "2", "--trust-remote-code"]
    assert sglang_args(Layout(tp=8, pp=2, dp=8, dp_attention=True)) == [
        "--tp-size",
        "8",
        "--pp-size",
        "2",
        "--dp-size",
        "8",
        "--enable-dp-attention",
    ]
    assert vllm_args(Layout(tp=4, ep=8, dp=2, pp=2)) == [
        "--tensor-parallel-size",
        "4",
        "--pipeline-parallel-size",
        "2",
        "--data-parallel-size",
        "2",
        "--enable-expert-parallel",
    ]
    assert engine_args(Layout(tp=8, ep=8), "sglang") == ["--tp-size", "8", "--ep-size", "8"]
    assert engine_args(Layout(tp=8, ep=8), "vllm") == [
        "--tensor-parallel-size",
        "8",
        "--enable-expert-parallel",
    ]


@pytest.mark.parametrize(
    ("text", "sglang", "vllm"),
    [
        ("TP8", 8, 8),
        ("EP8", 8, 8),
        ("PP8", 8, 8),
        ("TP4 EP2", 4, 4),  # SGLang carves EP out of TP: 4 GPUs, as the story ran it
        ("TP8 DP8 DPA", 8, 64),  # DP attention runs inside the TP group; vLLM's DP multiplies
        ("TP4 DP2", 8, 8),  # plain --dp-size: two SGLang replicas
        ("TP2 PP2 DP2", 8, 8),
    ],
)
def test_gpus_used(text: str, sglang: int, vllm: int) -> None:
    layout = parse_layout(text)
    assert gpus_used(layout, "sglang") == sglang
    assert gpus_used(layout, "vllm") == vllm


def test_check_layout_accepts_the_seed_layouts() -> None:
    for text in ("TP8", "EP8", "PP8", "TP4 EP2"):
        assert check_layout(parse_layout(text), "sglang", num_experts=384, gpu_count=8) is None


@pytest.mark.parametrize(
    ("text", "engine", "kwargs", "words"),
    [
        ("TP4 EP3", "sglang", {}, "must divide --tp-size 4"),
        ("TP2 EP4", "sglang", {}, "must divide --tp-size 2"),
        ("TP5 EP5", "sglang", {"num_experts": 384}, "384 experts are not divisible by EP 5"),
        ("TP6 EP6", "vllm", {"num_experts": 8}, "8 experts are not divisible by EP 6"),
        ("TP8 PP2", "sglang", {"gpu_count": 8}, "needs 16 GPUs under sglang, the host has 8"),
        ("TP8 DPA", "sglang", {}, "needs --dp-size of 2 or more"),
        ("TP8 DP3 DPA", "sglang", {}, "must divide --tp-size 8"),
        ("TP4 EP2", "vllm", {}, "TP x DP = 4"),
    ],
)
def test_check_layout_refuses(text: str, engine: str, kwargs: dict, words: str) -> None:
    reason = check_layout(parse_layout(text), engine, **kwargs)
    assert reason is not None
    assert words in reason


def test_check_layout_without_engine_rules_still_counts_gpus() -> None:
    assert check_layout(Layout(tp=8), "openai", gpu_count=8) is None
    assert check_layout(Layout(tp=8), "openai", gpu_count=4) is not None


# ---- property tests ---------------------------------------------------------------------------

_sizes = st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, 64])
_extra = st.sampled_from(
    [(), ("--trust-remote-code",), ("--max-model-len", "4096"), ("--model-path", "/m/k2")]
)


@st.composite
def sglang_layouts(draw: st.DrawFn) -> Layout:
    """Layouts SGLang accepts: ep divides tp; DP attention needs 2 <= dp dividing tp."""
    tp = draw(_sizes)
    ep = draw(st.sampled_from([d for d in range(1, tp + 1) if tp % d == 0]))
    dp_attention = draw(st.booleans()) and tp > 1
    if dp_attention:
        dp = draw(st.sampled_from([d for d in range(2, tp + 1) if tp % d == 0]))
    else:
        dp = draw(_sizes)
    return Layout(tp=tp, ep=ep, pp=draw(_sizes), dp=dp, dp_attention=dp_attention, extra_args=draw(_extra))


@st.composite
def vllm_layouts(draw: st.DrawFn) -> Layout:
    """Layouts vLLM can express: EP is off or tp x dp."""
    tp, dp = draw(_sizes), draw(_sizes)
    ep = tp * dp if draw(st.booleans()) else 1
    return Layout(tp=tp, ep=ep, pp=draw(_sizes), dp=dp, extra_args=draw(_extra))


@given(sglang_layouts())
def test_sglang_flags_round_trip(layout: Layout) -> None:
    assert parse_layout(shlex.join(sglang_args(layout))) == layout


@given(vllm_layouts())
def test_vllm_flags_round_trip(layout: Layout) -> None:
    assert parse_layout(shlex.join(vllm_args(layout))) == layout


@given(sglang_layouts())
def test_name_round_trips(layout: Layout) -> None:
    bare = Layout(layout.tp, layout.ep, layout.pp, layout.dp, layout.dp_attention)
    assert parse_layout(bare.name) == bare
    assert parse_layout(bare.name.lower()) == bare
    assert parse_layout(bare.name.replace(" ", "")) == bare


@given(st.text(max_size=80))
def test_any_text_parses_or_raises_layout_error(text: str) -> None:
    try:
        layout = parse_layout(text)
    except LayoutError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(layout, Layout)


@given(
    st.lists(
        st.sampled_from(
            ["TP", "EP", "pp", "dp", "=", ",", " ", "-", "--tp-size", "4", "0", "x", "DPA", '"', "é"]
        ),
        max_size=12,
    ).map("".join)
)
def test_layout_like_text_parses_or_raises_layout_error(text: str) -> None:
    try:
        parse_layout(text)
    except LayoutError as exc:
        assert "\n" not in str(exc)


@given(st.text(alphabet="qxz!@#%^&*()[]{}", min_size=1, max_size=20))
def test_garbage_always_raises_layout_error(text: str) -> None:
    with pytest.raises(LayoutError):
        parse_layout(text)
