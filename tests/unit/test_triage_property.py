"""Property tests: arbitrary text, invalid UTF-8 and 1 MB lines never raise, and never read as an OOM."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.domain.phases import PhaseTracker
from console.domain.triage.oom import OOM_MARKERS, parse_oom
from console.domain.triage.triager import Triager, classify_line, parse_rank
from console.domain.values import Engine, FindingClass

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Fragments of real lines, so generated text reaches the parsers' deeper branches.
FRAGMENTS = [
    "Traceback (most recent call last):",
    '  File "/x.py", line 1, in f',
    "torch.OutOfMemoryError: ",
    "Tried to allocate 672.00 MiB. ",
    "CUDA out of memory. ",
    "GPU 2 has a total capacity of 94.97 GiB of which 136.94 MiB is free. ",
    "this process has 9.0 GiB memory in use",
    "[2026-05-26 00:06:20 TP2] ",
    "(Worker_TP1_EP1 pid=1234) ",
    "ERROR 05-26 00:05:33 [x.py:1] ",
    "May 26 00:06:20 gpu-node-1 python3[1234]: ",
    "[rank3]:[E526 01:22:01.5 ProcessGroupNCCL.cpp:632] ",
    "Main process exited, code=exited, status=1/FAILURE",
    "Failed with result '",
    "Watchdog caught collective operation timeout: ",
    "OpType=ALLREDUCE Timeout(ms)=600000)",
    "[Errno 98] ",
    "Address already in use",
    "Capture cuda graph failed",
    "Loading safetensors checkpoint shards:  45% Completed | 29/64 ",
    "Free memory on device (",
    "ValueError: ",
    "KV cache is needed, which is larger than the available KV cache memory",
    "Application startup complete.",
    "The server is fired up and ready to roll!",
    "\r",
    "\n",
    "\x00",
    "\ufffd",
    "\x1b[31m",
    "RuntimeError: Engine core initialization failed. Failed core proc(s): {",
    "x.service: Main process exited, code=killed, status=",
]

line_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=12).map("".join)


def _real_oom_text(text: str) -> bool:
    return any(marker in text for marker in OOM_MARKERS)


@SETTINGS
@given(st.lists(line_text, max_size=30))
def test_arbitrary_text_never_raises_and_never_invents_an_oom(lines):
    triager = Triager()
    reported: set[tuple[object, object, str]] = set()
    trackers = [PhaseTracker(engine) for engine in Engine]
    for i, line in enumerate(lines):
        parse_rank(line)
        single = classify_line(line)
        if single is not None and single.cls is FindingClass.CUDA_OOM:
            assert _real_oom_text(line)
        for finding in triager.feed(line, float(i)):
            if finding.cls is FindingClass.CUDA_OOM or finding.oom is not None:
                assert _real_oom_text(finding.line)
            key = (finding.cls, finding.rank, finding.summary)
            assert key not in reported  # never the same finding twice
            reported.add(key)
            assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in finding.summary)
        for tracker in trackers:
            event = tracker.feed(line, float(i))
            if event is not None and event.progress is not None:
                assert 0.0 <= event.progress <= 1.0


@SETTINGS
@given(st.binary(max_size=400))
def test_invalid_utf8_decoded_with_replace(data):
    text = data.decode("utf-8", errors="replace")
    triager = Triager()
    for line in text.splitlines() or [text]:
        classify_line(line)
        for finding in triager.feed(line):
            assert finding.cls is not FindingClass.CUDA_OOM or _real_oom_text(finding.line)
    assert parse_oom(text) is None or _real_oom_text(text)


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_one_megabyte_lines_are_fast(fragment):
    filler = "x" * (1 << 20)
    for where in (0, 1 << 19, 1 << 20):
        line = filler[:where] + fragment + filler[where:]
        started = time.process_time()
        findings = Triager().feed(line)
        classify_line(line)
        PhaseTracker(Engine.SGLANG).feed(line, 0.0)
        PhaseTracker(Engine.VLLM).feed(line, 0.0)
        elapsed = time.process_time() - started
        assert all(len(f.line) <= 2000 for f in findings)
        assert elapsed < 0.5, (fragment, where)  # CPU s, generous: linear scans of 1 MB take ms


def test_one_megabyte_oom_line_keeps_its_figures():
    line = (
        "y" * (1 << 20)
        + " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. GPU 2 has a total "
        "capacity of 94.97 GiB of which 136.94 MiB is free."
    )
    finding = classify_line(line)
    assert finding.cls is FindingClass.CUDA_OOM
    assert (finding.oom.gpu, finding.oom.tried_bytes) == (2, 672 << 20)
    assert len(finding.line) == 2000


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FRAGMENTS), st.sampled_from(FRAGMENTS), st.text(max_size=30))
def test_oom_needs_the_oom_sentence_not_its_parts(a, b, noise):
    # The OOM's figures alone ("Tried to allocate", "GPU 2 has a total capacity ...") are no OOM.
    line = a + noise + b
    finding = classify_line(line)
    if finding is not None and finding.cls is FindingClass.CUDA_OOM:
        assert _real_oom_text(line)


HEADERS = ["", "May 26 00:06:20 gpu-node-1 python3[1234]: ", "[2026-05-26 00:06:20 DP0 TP3 EP3] ",
           "(Worker_TP1_EP1 pid=1234) ERROR 05-26 00:05:33 [x.py:1] "]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(HEADERS), st.integers(min_value=0, max_value=4095), st.text(max_size=60))
def test_real_oom_sentence_is_always_read(header, gpu, noise):
    line = (
        f"{header}torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU {gpu} has a "
        f"total capacity of 94.97 GiB of which 3.00 MiB is free. {noise}"
    )
    finding = classify_line(line)
    assert finding is not None and finding.cls is FindingClass.CUDA_OOM
    assert (finding.oom.gpu, finding.oom.tried_bytes, finding.oom.free_bytes) == (gpu, 20 << 20, 3 << 20)
