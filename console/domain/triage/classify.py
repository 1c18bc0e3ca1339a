"""One message -> one finding: the gates, the quiet rules and the signature table, with no state.

`classify_line` reads one line on its own; the Triager (triage.py) calls `finding_of` on each message
it has assembled (a traceback's final line, a rejoined wrapped message), with what the traceback's
frames told it.
"""

from __future__ import annotations

from console.domain.log_origin import by_systemd, is_request_text
from console.domain.rank import split_header
from console.domain.triage.catalogue import WEIGHTS_OOM_HINT, hint_for
from console.domain.triage.normalise import TRACEBACK_MARKER, Block, exception_name
from console.domain.triage.signature_table import GATES, read_signature
from console.domain.triage.signatures import clip
from console.domain.values import Finding, FindingClass

#: Finding.line keeps at most this many characters of a (possibly 1 MB) line.
MAX_LINE_CHARS = 2000
#: Levels below ERROR: what a logger says at them is never fatal.
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "TRACE", "SUCCESS"})
_GATES = (*GATES, TRACEBACK_MARKER, 'File "')
#: Words of a message (not an exception's) that say the engine goes on.
_GOING_ON = ("Retrying", "retrying", "will retry", "eprecat")


def may_match(line: str) -> bool:
    """False when the line holds no gate: the whole cost of an ordinary line."""
    for gate in _GATES:
        if gate in line:
            return True
    return False


def quiet(payload: str, level: str | None) -> bool:
    """A warning, a retry or a deprecation: worth a note, never fatal."""
    if level in QUIET_LEVELS:
        return True
    name = exception_name(payload)
    if name is not None:
        return name.endswith("Warning")  # UserWarning, FutureWarning ...; any other exception may be fatal
    head = payload[:300]
    return any(words in head for words in _GOING_ON) or ("NCCL WARN" in head and "/dev/shm" not in head)


def finding_of(
    text: str, line: str, rank: str | None, level: str | None, ts: float | None, seq: int, block: Block | None,
    *, systemd: bool = False,
) -> Finding | None:
    """Classify a message; None when no signature names it.

    Args:
        text: The message (a line's payload, or a message rejoined from wrapped lines).
        line: The log line it came from, kept in the finding.
        rank: The rank its prefix (or its traceback's) names.
        level: The log level it was logged at.
        ts: When it was logged.
        seq: The number of its line in the stream.
        block: The traceback it ends, when it ends one (its frames give weight-load and capture context).
        systemd: Whether systemd wrote it (only then are systemd's words about the unit read).
    """
    found = read_signature(text, rank, systemd=systemd)
    if found is None:
        # An exception no signature names, raised in the weight loader or a CUDA-graph capture, is
        # that step failing (`KeyError: 'midlayer...weight'` in load_weights).
        if block is None or not (block.weights or block.capture):
            return None
        cls = FindingClass.WEIGHT_LOAD_ERROR if block.weights else FindingClass.CUDA_GRAPH
        what = "Weights could not be loaded" if block.weights else "CUDA graph capture failed"
        return Finding(cls, line[:MAX_LINE_CHARS], f"{what}: {clip(text, 140)}", rank, not quiet(text, level),
                       ts=ts, hint=hint_for(cls), seq=seq)
    cls, reading = found
    context = reading.context
    if context is None and block is not None and block.capture and cls is not FindingClass.CUDA_GRAPH:
        context = FindingClass.CUDA_GRAPH
    return Finding(
        cls=cls, line=line[:MAX_LINE_CHARS], summary=reading.summary, rank=rank,
        fatal=reading.fatal and (reading.certain or not quiet(text, level)), oom=reading.oom, ts=ts,
        hint=reading.hint or (WEIGHTS_OOM_HINT if cls is FindingClass.CUDA_OOM and block is not None and block.weights
                              else hint_for(cls)), context=context, seq=seq,
    )


def classify_line(line: str, *, systemd: bool | None = None) -> Finding | None:
    """Classify one log line on its own.

    Args:
        line: One line of engine or systemd output, with or without a journal prefix.
        systemd: Whether systemd wrote it, as its journal entry says; None when only the line's shape
            can tell (log_origin.by_systemd).

    Returns:
        A finding, or None for an ordinary line (including the harmless NCCL bind warning) and for a
        request's text that the engine logged.
    """
    if not may_match(line):
        return None
    line = line.rstrip("\r\n")
    header = split_header(line, deep=True)
    if header.payload[:1] in (" ", "\t") or is_request_text(header.payload):
        return None  # a traceback frame or quoted source code, or a client's text: not a message
    return finding_of(header.payload, line, header.rank, header.level, None, 0, None,
                      systemd=by_systemd(header, systemd, about_unit=True))
