"""Triage on logs a terminal hard-wrapped: the width is learned from the log, the rest of a line is read
with it, a prefix alone on its line is followed by its message, and a journal of same-length lines
never joins two whole lines. The whole corpus, re-wrapped at 80 and 120 columns, holds a floor."""

from __future__ import annotations

import corpus_labels
import pytest

from console.domain.triage.root_cause import decisive
from console.domain.triage.triager import Triager, triage_lines
from console.domain.triage.wraps import REPEATS, WrapWidth
from console.domain.values import FindingClass

C = FindingClass
#: Scores measured on the corpus (272 logs, 268 right unwrapped) when the rules last changed; the rest
#: miss because a wrap splits an exception's name or a frame's path, which no rule here rejoins.
REWRAP_FLOORS = {80: 257, 120: 262}


def hard_wrap(lines: list[str], width: int) -> list[str]:
    """Cut every line into pieces of `width` characters, as a terminal does."""
    out = []
    for line in lines:
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return out


def test_the_width_is_learned_from_lengths_that_recur():
    widths = WrapWidth()
    for _ in range(REPEATS - 1):
        widths.note(80)
    assert widths.width == 0
    widths.note(80)
    assert widths.width == 80


def test_a_message_cut_mid_word_past_the_learned_width_is_read_whole():
    filler = [("INFO 06-30 13:53:19 [loader.py:1] " + "loading shard " * 8)[:80]] * REPEATS
    line = ("(VllmWorker rank=1 pid=77) ERROR 06-30 13:53:19 [gpu_worker.py:1] ValueError: Free memory on device "
            "(31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95, 45.01 GiB).")
    found = decisive(triage_lines(filler + hard_wrap([line], 80)))
    assert found is not None and found.cls is C.MEMORY_IN_USE and "31.44" in found.summary


def test_a_prefix_alone_on_its_line_is_followed_by_its_message():
    lines = hard_wrap([
        "(VllmWorker rank=0 pid=3926141) ERROR 08-12 01:36:10 [multiproc_executor.py:511] ValueError: Free memory on "
        "device (16.61/23.68 GiB) on startup is less than desired GPU memory utilization (0.8, 18.95 GiB)."
    ], 80)
    assert lines[0].endswith("]") and lines[1].startswith(" ValueError")
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.MEMORY_IN_USE


def test_an_unexplained_long_line_reads_its_rest():
    lines = hard_wrap([
        "(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [linear.py:210] Failed to create unquantized linear "
        "weights: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a total capacity of 93.09 GiB of "
        "which 739.81 MiB is free."
    ], 80)
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.CUDA_OOM
    assert found.oom.tried_bytes == 896 * 2**20 and found.oom.free_bytes == round(739.81 * 2**20)


def test_an_oom_cut_before_tried_waits_for_its_figures():
    lines = [
        "ERROR 10-11 12:27:29 engine.py:157] OutOfMemoryError('CUDA out of memory. Tried ",
        "to allocate 138.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 2.19 Mi",
        "B is free.')",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.oom.total_bytes == round(79.15 * 2**30)


def test_a_journal_of_same_length_lines_never_joins_two_whole_lines():
    access = 'INFO:     127.0.0.1:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK Error'
    triager = Triager()
    for _ in range(10):
        assert triager.feed(access) == []
    # an untagged line after a full-width line is read as its rest only when it is not a line of its own
    assert triager.feed("Traceback (most recent call last):") == []
    assert triager.feed('  File "/x.py", line 1, in f') == []
    found = triager.feed("ValueError: No available memory for the cache blocks.")
    assert [f.cls for f in found] == [C.KV_CACHE_TOO_SMALL]


def test_the_figured_oom_wins_over_a_figureless_one_of_another_rank():
    lines = [
        "[rank1]: RuntimeError: CUDA error: out of memory",
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 1.25 MiB is free.",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.oom.total_bytes == round(79.19 * 2**30)


@pytest.mark.parametrize("width", sorted(REWRAP_FLOORS))
def test_the_corpus_rewrapped_holds_its_floor(width: int):
    right = 0
    labels = corpus_labels._labels()
    for label in labels:
        path = corpus_labels.CORPUS / "logs" / label["file"]
        lines = hard_wrap(path.read_text(encoding="utf-8", errors="replace").splitlines(), width)
        triager = Triager()
        for line in lines:
            triager.feed(line)
        triager.finish()
        right += corpus_labels._right(label, triager.decisive())
    assert right >= REWRAP_FLOORS[width], f"{right}/{len(labels)} right at {width} columns"
