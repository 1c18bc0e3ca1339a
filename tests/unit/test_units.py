"""Byte sizes in PyTorch's spelling: format_bytes and parse_size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.sizes import GIB, KIB, MIB, format_bytes, gib, parse_size


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (704_643_072, "672.00 MiB"),
        (round(136.94 * MIB), "136.94 MiB"),
        (round(94.97 * GIB), "94.97 GiB"),
        (512, "512 bytes"),
        (0, "0 bytes"),
        (1536, "1.50 KiB"),
        (-3 * GIB, "-3.00 GiB"),
    ],
)
def test_format_bytes_matches_pytorch_spelling(n: int, text: str) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("672.00 MiB", 704_643_072),
        ("136.94 MiB", round(136.94 * MIB)),
        ("94.97 GiB", round(94.97 * GIB)),
        ("81.23 GB", round(81.23 * GIB)),  # SGLang writes GB for GiB
        ("273.15MiB", round(273.15 * MIB)),
        ("512", 512),
        ("12 KiB", 12 * KIB),
        (" 2 TiB ", 2 * 1024 * GIB),
    ],
)
def test_parse_size_reads_binary_units(text: str, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "MiB", "12 parsecs", "1.2.3 GiB", "-4 GiB", "GiB 4"])
def test_parse_size_rejects_non_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


@given(st.integers(min_value=KIB, max_value=10**15))
def test_format_then_parse_is_within_rounding(n: int) -> None:
    back = parse_size(format_bytes(n))
    assert abs(back - n) <= n * 0.005


def test_gib_converts_bytes() -> None:
    assert gib(3 * GIB) == 3.0
