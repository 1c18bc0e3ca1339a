"""Reading a log's messages whole: tracebacks, the context that opened them, and wrapped lines.

rank.py strips each line's prefixes; this module holds what spans lines:

- a traceback being read (`Block`): the rank and level that opened it, whether its opening says it
  ended the process (`Scheduler hit an exception`, a bare uncaught traceback) or was handled (a
  request's error, `Exception in thread`), and what its frames passed through (`load_weights`, a
  CUDA-graph capture);
- a message that may continue on the next lines (`Pending`): terminals, loggers and issue trackers
  wrap long lines, even mid-word, onto lines that carry no prefix; a C++ `terminate called` is
  followed by its indented `what():`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.domain.log_origin import names_a_unit
from console.domain.rank import LineHeader, split_header
from console.domain.triage.signatures import PARAM_NAME
from console.domain.values import Finding, FindingClass

TRACEBACK_MARKER = "Traceback (most recent call last):"
FRAME_MARKER = 'File "'  # a frame's opening words: `  File "/x/y.py", line 1, in f`
# The last line of a traceback: `ValueError: msg`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`,
# vLLM's `OutOfMemoryError('CUDA out of memory ...')`.
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w{0,80}\.){0,8}(?P<name>[A-Za-z_]\w{0,80})(?::(?: |$)|\(['\"]|$)")
_QUOTED_PARAM = re.compile("'" + PARAM_NAME + "'")
#: Words before a traceback that say it ended the process (or the engine with it).
_FATAL_CONTEXT = (
    "hit an exception", "failed to start", "Exception in worker", "encountered a fatal error",
    "Error executing method", "Initialization failed", "fatal error", "Engine core proc",
)
#: Words before a traceback that say something caught it and went on.
_HANDLED_CONTEXT = (
    "Exception in ASGI application", "Exception in thread", "Task exception was never retrieved",
    "Exception ignored", "Exception in callback", "Error in preprocessing", "etrying", "Error in request",
    "Error handling request",  # aiohttp's server, of one request's handler (a client that hung up)
)
_PROCESS_LINE = re.compile(r"Process [\w.-]{1,60}:$")
#: Lines that end a message: the next exception of a chain, C++ backtraces.
_MESSAGE_ENDS = (
    TRACEBACK_MARKER, "During handling of the above exception", "The above exception was the direct cause",
    "Exception raised from", "frame #", 'File "',
)
#: Frames of an engine's own main loop: an exception that unwinds through one kills the engine
#: (vLLM V0's `run_engine_loop`, V1's `run_busy_loop`, SGLang's scheduler `event_loop_*`).
_ENGINE_LOOPS = ("in run_engine_loop", "in run_busy_loop", "in event_loop_normal", "in event_loop_overlap",
                 "in event_loop_pp")
#: A line this long may have been wrapped by a terminal or an issue tracker.
WRAP_WIDTH = 70
_MAX_PIECES = 8
_MAX_TEXT = 4000


def exception_name(payload: str) -> str | None:
    """The exception a traceback's last line names (`ValueError`), or None for other text."""
    m = _EXCEPTION_LINE.match(payload)
    if m is None:
        return None
    name = m.group("name")
    if name[0].isupper() or "Error" in name or "Exception" in name:
        return name
    return None


def names_a_parameter(headline: str | None) -> bool:
    """Whether a traceback's headline is only a quoted parameter name: `logger.exception(e)` of a
    KeyError prints `'layers.0.mlp.down_proj.weight.absmax'` before the traceback."""
    return headline is not None and _QUOTED_PARAM.fullmatch(headline.strip()) is not None


def is_frame(payload: str) -> bool:
    """A traceback's frame, source line, caret line or blank line: not its final message. A frame
    may have lost its indent (issue trackers and log shippers strip leading blanks)."""
    return not payload.strip() or payload[0] in (" ", "\t") or payload.startswith(FRAME_MARKER)


@dataclass(slots=True)
class Block:
    """An open traceback of one writer.

    Attributes:
        rank: The rank that opened it.
        opened_at: The Triager's line count when it opened.
        level: The log level it was logged at (a WARNING-level traceback is quiet).
        fatal: True when its opening says it ended the process, False when something handled it,
            None when its opening does not say.
        headline: The logger's message just before it (`logger.exception(e)` prints str(e) first).
        weights: Whether a frame is in the weight loader.
        last_frame: The last `File "..."` line read, to say where a cut-off traceback was.
        last_at: The line count at its last frame.
        wrapped: Whether its last line was long enough to have been wrapped onto the next.
        capture: Whether a frame is in a CUDA-graph capture.
        handled: Whether it is a request's error, answered by a running server.
        engine_loop: Whether a frame is the engine's own main loop.
    """

    rank: str | None
    opened_at: int
    level: str | None
    fatal: bool | None
    headline: str | None
    weights: bool = False
    capture: bool = False
    handled: bool = False
    last_frame: str = ""
    last_at: int = 0
    wrapped: bool = False
    engine_loop: bool = False

    @property
    def ends_engine(self) -> bool:
        """Whether its exception ended the engine: its opening says so, or, when the opening is not
        known, a frame is the engine's main loop."""
        return self.fatal is True or (self.fatal is None and self.engine_loop)

    def note_frame(self, payload: str, seq: int, raw_len: int, *, piece: bool = False) -> None:
        """Learn from one frame (line `seq` of the stream, `raw_len` long) where the exception was
        raised; `piece` is the rest of a frame that a terminal or an issue tracker wrapped."""
        self.last_at = seq
        self.wrapped = raw_len >= WRAP_WIDTH
        frame = payload[:400].lstrip()  # bounded: a frame line may be 1 MB
        if frame.startswith(FRAME_MARKER):
            self.last_frame = frame
        elif piece:
            payload = self.last_frame[-60:] + frame  # a name cut mid-word: `load_wei` + `ghts`
            if len(self.last_frame) < 400:
                self.last_frame += frame
        if "load_weights" in payload or "weight_loader" in payload or "load_state_dict" in payload or (
            "_weights_iterator" in payload or "weight_utils.py" in payload
        ):
            self.weights = True
        if "cuda_graph" in payload or "capture" in payload or "cudagraph" in payload:
            self.capture = True
        if "/serving_" in payload or "serving_chat" in payload:
            self.handled = True
        if " in " in frame and frame.endswith(_ENGINE_LOOPS):
            self.engine_loop = True


def opening_context(header: LineHeader, before: str, prev: LineHeader | None) -> tuple[bool | None, str | None]:
    """Whether a traceback ended the process, from what opened it; and the logger's headline.

    Args:
        header: The header of the `Traceback (most recent call last):` line.
        before: The text before the marker on that line (`Scheduler hit an exception: `).
        prev: The header of the line before, when there was one.

    Returns:
        (fatal, headline): fatal is True, False (handled) or None (the opening does not say).
    """
    same_writer = prev is not None and prev.stream == header.stream
    context = before.strip() or (prev.payload.strip() if same_writer and prev is not None else "")
    headline = None
    if same_writer and prev is not None and prev.level in ("ERROR", "CRITICAL") and not is_frame(prev.payload):
        headline = prev.payload.strip() or None
    for words in _HANDLED_CONTEXT:
        if words in context:
            return False, None
    if "serving_" in context:
        return False, None
    for words in _FATAL_CONTEXT:
        if words in context:
            return True, headline
    if _PROCESS_LINE.match(context):
        return True, headline  # multiprocessing's "Process EngineCore_0:": that process died of it
    if not before.strip() and header.level is None:
        return True, headline  # a bare traceback, printed by no logger: uncaught, it ends the process
    return None, headline


def open_block(header: LineHeader, prev: str | None, seq: int) -> Block:
    """A traceback opened at its marker (line `seq`), with what its opening says; or (prev None) at a
    frame: an excerpt that starts inside one, whose opening is not known.

    Args:
        header: The header of the line that opened it.
        prev: The line before it ("" at a log's start), or None for an excerpt.
        seq: The line's number in the stream.
    """
    fatal, headline = None, None
    if prev is not None:
        before = header.payload.split(TRACEBACK_MARKER, 1)[0]
        prev_header = split_header(prev.rstrip("\r\n"), deep=True) if prev else None
        fatal, headline = opening_context(header, before, prev_header)
    return Block(header.rank, seq, header.level, fatal, headline, handled=fatal is False,
                 weights=names_a_parameter(headline))


@dataclass(slots=True)
class Pending:
    """A message whose next lines may continue it; `finding` is its classification so far."""

    stream: str
    rank: str | None
    level: str | None
    ts: float | None
    seq: int
    line: str
    block: Block | None
    text: str
    last_len: int
    finding: Finding | None = None
    pieces: int = 1
    reported: FindingClass | None = None  # the class it was reported as, when it was reported

    def extend(self, payload: str, raw_len: int) -> bool:
        """Append a continued line; False when the message is already as long as it may grow."""
        if self.pieces >= _MAX_PIECES or len(self.text) >= _MAX_TEXT:
            return False
        piece = payload.strip()
        if self.text.startswith("terminate called") and piece.startswith("what():"):
            self.text = f"{self.text} {piece}"
        else:
            self.text += piece if payload[:1] not in (" ", "\t") else " " + piece
        self.line = f"{self.line} {piece}" if len(self.line) < _MAX_TEXT else self.line
        self.last_len = raw_len
        self.pieces += 1
        return True


def may_continue(pending: Pending) -> bool:
    """Whether the next line may still belong to this message."""
    return pending.last_len >= WRAP_WIDTH or pending.text.startswith("terminate called")


def continues(pending: Pending, header: LineHeader, raw_len: int) -> bool:
    """Whether this line continues the pending message: a wrapped piece (a line with no prefix of
    its own, or only its writer's), or the `what():` after a C++ `terminate called`."""
    payload = header.payload
    if not payload.strip() or not may_continue(pending):
        return False
    stripped = payload.lstrip()
    if pending.text.startswith("terminate called"):
        return stripped.startswith("what():")
    if stripped.startswith(_MESSAGE_ENDS) or exception_name(payload) and ": " in payload[:120]:
        return False
    if names_a_unit(payload):
        return False  # systemd's own line about the unit: never the engine's message
    if not header.tagged:
        return True
    return bool(header.stream) and header.stream == pending.stream and header.level is None


def looks_incomplete(pending: Pending) -> bool:
    """Whether the message should wait for its next line: unclassified (a wrap may hide its class),
    a C++ abort waiting for its `what():`, or an OOM whose figures were cut off."""
    if not may_continue(pending):
        return False
    finding = pending.finding
    if finding is None or finding.cls.value in ("traceback", "engine_error"):
        return True
    return oom_cut(finding, pending.text)


def oom_cut(finding: Finding, text: str) -> bool:
    """An OOM message whose figures a wrapped line cut off: PyTorch's `CUDA out of memory.` is always
    followed by `Tried to allocate X. GPU N has a total capacity of Y of which Z is free`."""
    oom = finding.oom
    if oom is None or oom.total_bytes is not None or "is free" in text or "free;" in text:
        return False
    if "Tried to allocate" in text:
        return True
    _, marker, rest = text.partition("CUDA out of memory.")
    rest = rest.strip()
    return bool(marker) and "Tried to allocate".startswith(rest)  # cut inside its next words
