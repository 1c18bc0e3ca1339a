"""A request's text that an engine logged is never a finding, and systemd's words count only in systemd's lines.

The samples are real request-log lines (tests/fixtures/request_logs/SOURCES.md); a hostile prompt is
spliced into each sample's own user-controlled field, so the format around it stays the engine's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.domain.phases import PhaseTracker
from console.domain.triage.classify import classify_line
from console.domain.triage.triager import Triager, triage_lines
from console.domain.values import Engine, FindingClass, Phase

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "request_logs"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity "
       "of 79.19 GiB of which 1.20 GiB is free.")
KILLED = "Main process exited, code=killed, status=9/KILL"
HOSTILE = [
    OOM,
    KILLED,
    f"sglang.service: {KILLED}",
    "sglang.service: Failed with result 'oom-kill'.",
    "NCCL WARN Cuda failure 'out of memory'",  # read as fatal at any level when it is the engine's
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: CUDA error: an illegal memory access",
    "The server is fired up and ready to roll! Application startup complete. Uvicorn running on x",
    "Killed",
]


def _sample(name: str) -> list[str]:
    return (SAMPLES / name).read_text(encoding="utf-8").splitlines()


def _sglang_receive(text: str) -> str:
    line = _sample("sglang_0.4.3_receive.log")[1]
    return line.replace("GenerateReqInput(text=None,", f"GenerateReqInput(text={text!r},", 1)


def _sglang_finish(text: str) -> str:
    line = _sample("sglang_0.5.10_finish_exported.log")[0]
    return line.replace("'stop': None,", f"'stop': [{text!r}],", 1)


def _vllm_prompt(text: str) -> str:
    line = _sample("vllm_0.6_received_request_prompt.log")[1]
    return line.replace("'Who is afraid of the big bad wolf?'", repr(text), 1)


def _vllm_params(text: str) -> str:
    line = _sample("vllm_0.15_received_request_params.log")[3]
    return line.replace("stop=[],", f"stop=[{text!r}],", 1)


# Forms no thread showed whole, written as the engines' sources format them.
def _sglang_openai(text: str) -> str:  # tokenizer_manager: logger.info(f"Receive OpenAI: obj={...}")
    return f"[2026-05-26 00:06:20] Receive OpenAI: obj=ChatCompletionRequest(messages=[{{'role': 'user', 'content': {text!r}}}])"


def _sglang_before_04(text: str) -> str:  # tokenizer_manager: logger.info(f"in={obj}, out={out}")
    return f"[2024-07-01 10:00:00] in=GenerateReqInput(text={text!r}, rid='1'), out={{'text': {text!r}}}"


def _sglang_json(text: str) -> str:  # request_logger._log_json: json.dumps({"timestamp", "event", **data})
    import json

    return json.dumps({"timestamp": "2026-05-26T00:06:20", "event": "request.received", "rid": "1",
                       "obj": {"text": text}}, ensure_ascii=False)


def _vllm_details(text: str) -> str:  # logger.debug("Request %s details: prompt: %r, ...")
    return f"(APIServer pid=7) DEBUG 05-26 00:06:20 [logger.py:40] Request cmpl-1 details: prompt: {text!r}, prompt_token_ids: [1]."


def _vllm_output(text: str) -> str:  # logger.info("Generated response %s%s: output: %r, ...")
    return f"(APIServer pid=7) INFO 05-26 00:06:20 [logger.py:70] Generated response cmpl-1: output: {text!r}, finish_reason: stop"


FORMS = [_sglang_receive, _sglang_finish, _vllm_prompt, _vllm_params, _sglang_openai, _sglang_before_04,
         _sglang_json, _vllm_details, _vllm_output]


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.log")))
def test_the_real_request_logs_are_quiet(name):
    lines = _sample(name)
    assert triage_lines(lines) == []
    for engine in (Engine.SGLANG, Engine.VLLM):
        tracker = PhaseTracker(engine)
        assert [tracker.feed(line, 0.0) for line in lines] == [None] * len(lines)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_prompt_in_a_logged_request_is_never_a_finding(form, text):
    line = form(text)
    assert text.replace("\n", "\\n")[:20] in line or text[:20] in line  # the prompt is in the line
    assert classify_line(line) is None
    assert triage_lines([line]) == []
    triager = Triager()
    for source in (None, False):
        assert triager.feed(line, 1.0, source) == []
    assert triager.finish() == [] and triager.decisive() is None


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_a_hostile_prompt_moves_no_phase(form):
    for engine in (Engine.SGLANG, Engine.VLLM):
        tracker = PhaseTracker(engine)
        tracker.feed("[2026-05-26 00:06:20] Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", 1.0)
        tracker.feed("(APIServer pid=7) INFO 05-26 00:06:20 [api_server.py:1] Starting vLLM API server on x", 1.0)
        before = tracker.phase
        for text in HOSTILE:
            assert tracker.feed(form(text), 2.0) is None
            assert tracker.feed(form(text), 2.0, False) is None
        assert tracker.phase is before and before is Phase.HTTP_UP


def test_a_prompt_between_uvicorn_and_ready_leaves_the_start_healthy():
    # The repro at the triage level: a request arrives during SGLang's warm-up.
    log = [
        "[2026-05-26 00:06:20] Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        _sglang_receive(OOM),
        _sglang_receive(f"sglang.service: {KILLED}"),
        '[2026-05-26 00:06:21] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK',
        "[2026-05-26 00:06:21] The server is fired up and ready to roll!",
    ]
    triager, tracker = Triager(Engine.SGLANG), PhaseTracker(Engine.SGLANG)
    assert [f for line in log for f in triager.feed(line, 1.0, False)] == []
    assert [tracker.feed(line, 1.0, False) is not None for line in log] == [True, False, False, True, True]
    assert tracker.phase is Phase.READY


def test_a_request_line_never_continues_a_message_cut_by_a_wrap():
    # A long exception line waits for its wrapped rest; a request logged next is not that rest.
    head = "[2026-05-26 00:06:20 TP0] RuntimeError: something went wrong while the scheduler was busy with it"
    request = _sglang_receive(OOM).replace("[2025-03-03 17:53:04] ", "", 1)  # the newest SGLang writes it bare
    found = triage_lines([head, request])
    assert all(f.cls is not FindingClass.CUDA_OOM and OOM[:30] not in f.line for f in found)


# -- systemd's words count only in systemd's lines ----------------------------------------------------


@pytest.mark.parametrize("line", [
    f"sglang.service: {KILLED}",
    "sglang.service: Failed with result 'oom-kill'.",
    "sglang.service: Start request repeated too quickly.",
])
def test_systemds_words_in_the_units_own_output_are_no_finding(line):
    assert Triager().feed(line, 1.0, False) == []  # the journal says the engine wrote it
    assert Triager().feed(line, 1.0, True)[0].fatal  # the journal says systemd wrote it
    assert classify_line(line, systemd=False) is None
    assert classify_line(line) is not None  # a paste: the bare line is shaped as systemd's


@pytest.mark.parametrize(("line", "fatal"), [
    (f"May 26 00:06:21 gpu-node-1 systemd[1]: sglang.service: {KILLED}", True),
    (f"May 26 00:06:21 gpu-node-1 python3[2101]: sglang.service: {KILLED}", False),
    (f"[2026-05-26 00:06:21] sglang.service: {KILLED}", False),
    (f"(APIServer pid=7) INFO 05-26 00:06:20 [x.py:1] vllm.service: {KILLED}", False),
    (f"sglang.service: {KILLED}", True),
    (KILLED, False),  # systemd always names the unit
])
def test_a_paste_is_systemds_only_when_shaped_as_systemds(line, fatal):
    found = classify_line(line)
    assert (found is not None and found.cls is FindingClass.UNIT_FAILED and found.fatal) is fatal


def test_systemds_phase_milestones_come_only_from_systemd():
    tracker = PhaseTracker(Engine.SGLANG)
    tracker.feed("[2026-05-26 00:06:20] Load weight begin. avail mem=94.00 GB", 1.0)
    assert tracker.feed(f"sglang.service: {KILLED}", 2.0, False) is None
    assert tracker.feed("Started sglang.service - SGLang.", 2.0, False) is None
    assert tracker.phase is Phase.LOADING_WEIGHTS
    assert tracker.feed("[2026-05-26 00:06:21] The server is fired up and ready to roll!", 3.0, True) is None
    assert tracker.feed(f"sglang.service: {KILLED}", 4.0, True).phase is Phase.FAILED
