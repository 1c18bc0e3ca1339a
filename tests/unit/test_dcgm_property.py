"""parse_dcgm never raises: any text, and dcgm-exporter answers with lines cut, doubled or garbled."""

from __future__ import annotations

from fleet_text import EXPORT
from hypothesis import given, settings
from hypothesis import strategies as st

from console.hosts.gpus.dcgm import parse_dcgm

LINES = EXPORT.splitlines()


def _check(text: str) -> None:
    gpus, note = parse_dcgm(text)
    assert note is None or ("\n" not in note and note.startswith("dcgm-exporter:"))
    assert all(g.index >= 0 for g in gpus)
    assert [g.index for g in gpus] == sorted({g.index for g in gpus})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(LINES) - 1), st.integers(0, 200), st.text(max_size=8)), max_size=30))
def test_mutated_exports(edits: list[tuple[int, int, str]]) -> None:
    lines = list(LINES)
    for index, cut, junk in edits:
        line = lines[index % len(lines)]
        lines.append(line[:cut] + junk + line[cut:])
    _check("\n".join(lines) + "\n")
