"""Triage scored on real multi-node, expert-parallel and stop logs (tests/corpus/multinode/, see its SOURCES.md).

Issue 30 (C11): on logs set aside before tuning, a fatal finding that tells the truth for at least 80% of the
multi-node and EP failures, and no fatal finding on a stop that was asked for. A failure counts as right when
the decisive finding is fatal and names the label's class (the truth: `nvshmem_init`, not the open world's
`engine_error`); a stop when no finding is fatal.

    .venv/bin/python tests/unit/test_corpus_multinode.py [tune|holdout|round N]   # the per-class table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from console.domain.triage.triager import Triager
from console.domain.values import Finding

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "multinode"
FAILURE_BAR = 0.80


def triage_file(path: Path) -> Finding | None:
    """The decisive finding of one log, read as a stream to its end (as tests/unit/test_corpus.py reads)."""
    triager = Triager()
    with path.open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            triager.feed(line)
    triager.finish()
    return triager.decisive()


def _labels() -> list[dict]:
    return json.loads((CORPUS / "labels.json").read_text(encoding="utf-8"))


def _right(label: dict, found: Finding | None) -> bool:
    if label["kind"] == "stop":
        return found is None or not found.fatal
    return found is not None and found.fatal and found.cls.value == label["class"]


def score(split: str, held_out_in: int | None = None) -> list[tuple[dict, Finding | None, bool]]:
    """Every log of one split, or with `held_out_in` of one round's held-out set."""
    out = []
    for label in _labels():
        if (label["split"] == split) if held_out_in is None else (label.get("held_out_in") == held_out_in):
            found = triage_file(CORPUS / "logs" / label["file"])
            out.append((label, found, _right(label, found)))
    return out


def table(scored: list[tuple[dict, Finding | None, bool]]) -> str:
    lines = []
    for kind in ("multinode_ep", "stop"):
        rows = [s for s in scored if s[0]["kind"] == kind]
        lines.append(f"== {kind:<14} {sum(r for _, _, r in rows)}/{len(rows)}")
    for label, found, right in scored:
        if not right:
            got = f"{found.cls.value}{'' if found.fatal else ' (note)'}: {found.summary}" if found else "no finding"
            lines.append(f"MISS {label['file']} ({label['class']}) -> {got}")
    return "\n".join(lines)


def test_labels_are_well_formed():
    for label in _labels():
        assert (CORPUS / "logs" / label["file"]).is_file(), label["file"]
        assert label["kind"] in ("multinode_ep", "stop")
        assert label["fatal"] == (label["kind"] != "stop")
        assert label["split"] in ("tune", "holdout")


@pytest.mark.parametrize("split", ["tune", "holdout"])
def test_split_meets_the_bars(split):
    scored = score(split)
    report = table(scored)
    failures = [r for label, _, r in scored if label["kind"] == "multinode_ep"]
    stops = [r for label, _, r in scored if label["kind"] == "stop"]
    assert failures and stops, f"the {split} split lacks failures or stops"
    assert sum(failures) / len(failures) >= FAILURE_BAR, f"{split}: failures below {FAILURE_BAR:.0%}\n{report}"
    assert all(stops), f"{split}: a stop that was asked for got a fatal finding\n{report}"


if __name__ == "__main__":
    # `tune`, `holdout`, or `round N`: one round's held-out set.
    _split = sys.argv[1] if len(sys.argv) > 1 else "tune"
    print(table(score(_split, int(sys.argv[2]) if _split == "round" else None)))
