"""Issue 30 E21: an exception after which its writer went on serving did not end the engine, so a later
death (a SIGKILL, as the kernel's OOM killer sends) is never blamed on it."""

from __future__ import annotations

from console.domain.triage.triager import Triager
from console.domain.values import FindingClass

C = FindingClass
READY = "[2026-05-26 00:06:20] The server is fired up and ready to roll!"
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/aiohttp/web_protocol.py", line 480, in _handle_request',
    "    resp = await request_handler(request)",
    '  File "/usr/lib/python3/dist-packages/aiohttp/http_writer.py", line 75, in _write',
    '    raise ClientConnectionResetError("Cannot write to closing transport")',
    "aiohttp.client_exceptions.ClientConnectionResetError: Cannot write to closing transport",
]
SERVING = [
    '[2026-05-26 00:07:05] INFO:     127.0.0.1:51240 - "GET /health HTTP/1.1" 200 OK',
    "[2026-05-26 00:07:06 TP0] Decode batch. #running-req: 1, #token: 96, token usage: 0.00, "
    "gen throughput (token/s): 41.20, #queue-req: 0",
]
KILLED = ["sglang.service: Main process exited, code=killed, status=9/KILL",
          "sglang.service: Failed with result 'signal'."]


def _triage(lines: list[str]) -> Triager:
    triager = Triager()
    for line in lines:
        triager.feed(line)
    triager.finish()
    return triager


def test_aiohttps_error_handling_request_is_one_requests_error():
    triager = _triage([READY, "Error handling request from 127.0.0.1", *TRACEBACK, *SERVING])
    assert triager.decisive() is None
    assert not [f for f in triager.findings() if f.cls is C.ENGINE_ERROR]


def test_a_later_sigkill_is_not_blamed_on_an_exception_the_engine_outlived():
    triager = _triage([READY, *TRACEBACK, *SERVING, *KILLED])
    top = triager.decisive()
    assert top is not None and top.cls is C.UNIT_FAILED and "9/KILL" in top.summary, top
    note = next(f for f in triager.findings() if "ClientConnectionResetError" in f.summary)
    assert note.cls is C.TRACEBACK and not note.fatal and "went on serving" in note.summary


def test_an_exception_with_no_serving_after_it_still_explains_the_death():
    top = _triage([READY, *TRACEBACK, *KILLED]).decisive()
    assert top is not None and top.cls is C.ENGINE_ERROR and "ClientConnectionResetError" in top.summary


def test_another_writers_serving_does_not_acquit_a_workers_exception():
    # A worker (TP1) died of its exception; the head's /health still answered 200 for a moment.
    worker = [f"[2026-05-26 00:07:04 TP1] {line}" if not line.startswith(" ") else line for line in TRACEBACK]
    worker[0] = "[2026-05-26 00:07:04 TP1] Scheduler hit an exception: Traceback (most recent call last):"
    top = _triage([READY, *worker, SERVING[0], *KILLED]).decisive()
    assert top is not None and top.cls is C.ENGINE_ERROR and top.rank == "TP1", top
