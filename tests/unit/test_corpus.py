"""Triage scored on real logs from public issue threads (tests/corpus/, see its SOURCES.md).

Each log is labelled with the class of its root cause (or "healthy"). Triage reads the log as a
stream, then names its decisive finding. A log counts as right when:

- healthy: no fatal finding at all;
- a known class (one triage knew before the corpus): the decisive finding has the label's class, and
  for an OOM exactly the label's figures (GPU, tried, free, total bytes);
- a new class: the decisive finding is fatal and either names the class or is the open world's
  `engine_error`, whose summary is the exception's own words.

"tune" logs were read while writing the signatures, "holdout" logs never. Each round's held-out set was
gathered by other engineers while the rules were tuned on the rounds before, scored once unseen, and
then joined the tuning set ("held_out_in": N): round 1 held out 14 of the first 70, round 2 added 42,
round 3 44, round 4 66 (tests/corpus/SOURCES.md has each round's unseen score). Round 5's 50 logs are
the held-out set now: scored once, unseen, at cf2e01b (known 20/21, new 15/18, healthy 11/11), and held
to the issue's bars; no rule may be tuned on them while they are held out.

    .venv/bin/python tests/unit/test_corpus.py [tune|holdout|round N]   # the per-class table
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from corpus_labels import CORPUS, KNOWN, LABELS, _labels, _right

from console.domain.triage.triager import Triager
from console.domain.values import Finding, FindingClass

#: The bars (the issue's, on logs never used for tuning).
KNOWN_BAR = 0.90
NEW_BAR = 0.70
HEALTHY_BAR = 1.0


@dataclass(frozen=True)
class Scored:
    """One log's label and what triage made of it."""

    file: str
    label: str
    split: str
    decisive: Finding | None
    right: bool

    @property
    def group(self) -> str:
        if self.label == "healthy":
            return "healthy"
        return "known" if self.label in KNOWN else "new"


def triage_file(path: Path) -> Finding | None:
    """The decisive finding of one log, read as a stream to its end."""
    triager = Triager()
    with path.open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            triager.feed(line)
    triager.finish()
    return triager.decisive()


def score(split: str, held_out_in: int | None = None) -> list[Scored]:
    """Every log of one split (or, with `held_out_in`, of one round's held-out set), triaged and judged."""
    out = []
    for label in _labels():
        if label["split"] != split if held_out_in is None else label.get("held_out_in") != held_out_in:
            continue
        found = triage_file(CORPUS / "logs" / label["file"])
        out.append(Scored(label["file"], label["class"], split, found, _right(label, found)))
    return out


def rates(scored: list[Scored]) -> dict[str, tuple[int, int]]:
    """(right, total) per group: known, new, healthy."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in scored:
        totals[s.group][0] += s.right
        totals[s.group][1] += 1
    return {group: (right, total) for group, (right, total) in totals.items()}


def table(scored: list[Scored]) -> str:
    """Per-class right/total, then the groups, then each miss."""
    per_class: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in scored:
        per_class[s.label][0] += s.right
        per_class[s.label][1] += 1
    lines = [f"{cls:<26} {right}/{total}" for cls, (right, total) in sorted(per_class.items())]
    lines += [f"== {group:<23} {right}/{total}" for group, (right, total) in sorted(rates(scored).items())]
    for s in scored:
        if not s.right:
            got = f"{s.decisive.cls.value}: {s.decisive.summary}" if s.decisive else "no fatal finding"
            lines.append(f"MISS {s.file} ({s.label}) -> {got}")
    return "\n".join(lines)


def _check(split: str, *, every_group: bool = True, known_bar: float = KNOWN_BAR) -> None:
    """Fail when a group scores below its bar; a group with no logs fails too, unless every_group is
    False (a held-out set may hold no log of some group)."""
    scored = score(split)
    got = rates(scored)
    report = table(scored)
    for group, bar in (("known", known_bar), ("new", NEW_BAR), ("healthy", HEALTHY_BAR)):
        right, total = got.get(group, (0, 0))
        if total == 0 and not every_group:
            continue
        assert total > 0, f"no {group} logs in the {split} split"
        assert right / total >= bar, f"{split} {group}: {right}/{total} below {bar:.0%}\n{report}"


def test_labels_are_well_formed():
    labels = _labels()
    assert len(labels) >= 60
    names = {c.value for c in FindingClass} | {"healthy"}
    for label in labels:
        assert (CORPUS / "logs" / label["file"]).is_file(), label["file"]
        assert label["class"] in names, label["class"]
        assert label["split"] in ("tune", "holdout")
        assert label["fatal"] == (label["class"] != "healthy"), label["file"]


def test_tune_split_meets_the_bars():
    _check("tune")


@pytest.mark.skipif(not LABELS.exists(), reason="no corpus")
def test_holdout_split_meets_the_bars():
    if not any(label["split"] == "holdout" for label in _labels()):
        pytest.skip('no "holdout" logs in labels.json: every log so far has joined the tuning set; '
                    'a held-out set scores here once its entries are merged with split "holdout"')
    _check("holdout", every_group=False)


if __name__ == "__main__":
    # `tune`, `holdout`, or `round N`: one round's held-out set, wherever it is now.
    _split = sys.argv[1] if len(sys.argv) > 1 else "tune"
    _round = int(sys.argv[2]) if _split == "round" else None
    print(table(score(_split, _round)) or f'no logs with split "{_split}" in {LABELS}')
