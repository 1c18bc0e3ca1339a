"""Who wrote a log line: systemd about the unit, the engine itself, or a request the engine logged.

Triage and the start-up phases read the engine's own output and systemd's own lines, never a phrase
that merely appears somewhere in a line:

- A journal entry says who wrote it: journald's trusted fields mark systemd's lines (PID 1, `UNIT=`),
  and the unit's stdout carries `_SYSTEMD_UNIT` (hosts/systemd/parse.py). Callers pass that on as
  `by_systemd`.
- A pasted log has no fields, so the line's shape decides: systemd's line carries systemd's syslog
  prefix (`host systemd[1]: `), or, as `journalctl -o cat` prints it, no prefix at all.
- Engines log requests and their answers (SGLang `--log-requests`, vLLM `--enable-log-requests` and
  `--enable-log-outputs`), and uvicorn logs each request line: that text is a user's or the model's.
  Python's repr and JSON escape newlines, so such a request stays on its one line.
"""

from __future__ import annotations

import re

from console.domain.rank import LineHeader, split_header

# The opening of a logged request or answer, as the engines write it (after their prefixes).
_LOGGED_REQUEST = re.compile(
    r"(?:Receive(?: \w{1,20})?: obj="  # SGLang 0.4+: `Receive: obj=GenerateReqInput(text='...')`, `Receive OpenAI: obj=`
    r"|Finish: obj="  # SGLang: the request and its answer, `, out={'text': ...}`
    r"|in=\w{0,60}ReqInput\("  # SGLang before 0.4: `in=GenerateReqInput(...), out={...}`
    r"|\{\"[^{}\n]{0,120}?\"event\": \"request\."  # SGLang `--log-requests-format json`
    r"|Received (?:\w{1,30} )?request "  # vLLM: `Received request cmpl-1: prompt: '...'` / `: params: ...`
    r"|Request \S{1,200} details: "  # vLLM 0.10+ at DEBUG: `Request X details: prompt: '...'`
    r"|Generated response "  # vLLM `--enable-log-outputs`: `Generated response X: output: '...'`
    r"|(?:Added|Finished|Aborted) request "  # vLLM: a request's id, which a client may choose (X-Request-Id)
    r")"
)
# uvicorn's access line: `127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK` (the path is the client's).
_ACCESS_LINE = re.compile(r"[\w.:\[\]%-]{1,80}:\d{1,5} - \"[A-Z]{3,10} ")
#: Each engine's first line of a start: SGLang's launcher dumps its ServerArgs, vLLM prints its version
#: (`vLLM API server version 0.10.2`; since 0.11 `vLLM server version ...` or the logo below).
ENGINE_FIRST_LINES = ("server_args=ServerArgs(", "vLLM API server version", "vLLM server version")
# vLLM's logo, its version on the second line: ` ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0`.
_VLLM_LOGO_VERSION = re.compile(r"[ ▄▀█]{10,60}█  version \S")
#: systemd's line that begins a start of the unit (`Started sglang.service - SGLang.`).
SYSTEMD_STARTED = "Started "
#: A stop asked of the engine: vLLM's API server on SIGTERM, and systemd's own `Stopping UNIT...`. What
#: fails after it (vLLM 0.32's output handler logs EngineDeadError on every clean stop) is the stop's doing.
STOP_MARK = "[shutdown] API server: shutdown triggered"
STOPPING = "Stopping "
#: Words of a process that was sent SIGINT or SIGTERM (a terminal's Ctrl-C echoed as `^C`, Python's
#: KeyboardInterrupt, vLLM's `received signal=SIGINT`, abseil's `*** SIGTERM received`, a native runtime's
#: `Signal Received: 15`): only an operator or a supervisor sends those, so what fails after them is the
#: stop's doing (a multiprocessing engine's workers `died, exit code: -15`, its CRITICAL shutdown lines).
INTERRUPTED = ("KeyboardInterrupt", "^C", "received signal=SIGINT", "received signal=SIGTERM", "SIGTERM received",
               "Received SIGTERM", "Signal Received: 15", "Signal Received: 2 ")


def is_logged_request(payload: str) -> bool:
    """Whether a message (its prefixes stripped) is an engine's log of a request or of its answer."""
    return _LOGGED_REQUEST.match(payload) is not None


def is_request_text(payload: str) -> bool:
    """Whether a message's text is a client's or the model's: a logged request or answer, or uvicorn's
    access line (whose path and query the client wrote)."""
    return _LOGGED_REQUEST.match(payload) is not None or _ACCESS_LINE.match(payload) is not None


def names_a_unit(payload: str) -> bool:
    """Whether a message opens with the unit it is about (`sglang.service: Main process exited, ...`),
    as systemd's lines about a unit do."""
    end = payload.find(": ", 0, 256)  # a unit's name is at most 256 characters: a 1 MB line costs no more
    if end <= 0:
        return False
    unit = payload[:end]
    return unit.endswith((".service", ".scope")) and " " not in unit


def by_systemd(header: LineHeader, said: bool | None, *, about_unit: bool = False) -> bool:
    """Whether systemd wrote the line.

    Args:
        header: The line's header.
        said: What the journal entry says (True: systemd's own entry, False: the unit's output), or None
            for a pasted log, where the line's shape decides: systemd's syslog prefix, or no writer's
            prefix at all (no engine's prefix, level or rank).
        about_unit: A line about the unit's end (`Main process exited`, `Failed with result`) must,
            when nothing but its shape tells, also open with the unit's name, as systemd's do.
    """
    if said is not None:
        return said
    if header.ident is not None:
        return header.ident == "systemd"
    bare = not header.engine and header.level is None and header.rank is None
    return bare and (not about_unit or names_a_unit(header.payload))


def opens_engine_start(payload: str) -> bool:
    """Whether a message is an engine's first line of a start (never a request: it opens the message)."""
    return payload.startswith(ENGINE_FIRST_LINES) or _VLLM_LOGO_VERSION.match(payload) is not None


def asks_to_stop(line: str, systemd: bool | None) -> bool:
    """Whether a line says a stop was asked for: vLLM's `shutdown triggered`, systemd's `Stopping ...`, or
    a process interrupted by SIGINT or SIGTERM (INTERRUPTED)."""
    header = split_header(line, deep=True)
    payload = header.payload
    if payload.startswith(STOPPING):
        return by_systemd(header, systemd)
    if is_request_text(payload) or systemd:
        return False
    if STOP_MARK in payload or payload.startswith(("KeyboardInterrupt", "^C")):
        return True
    return any(words in payload for words in INTERRUPTED[2:])
