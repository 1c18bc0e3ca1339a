"""Failure triage: engine and systemd log lines -> typed findings, and the decisive one (docs/triage.md).

`classify_line` reads one line on its own. `Triager` reads a stream: it strips each line's prefixes
(rank.py, keeping the rank each names), follows tracebacks to their final exception with the context
that opened them and the frames they passed (normalise.py), reads the message a traceback's opening
line carries, rejoins wrapped messages and C++ `what():` lines, names what no signature names
(open_world.py), and reports each failure once per rank and start (starts.py). root_cause.py picks
the root cause. It reads the engine's own output and systemd's own lines: a request's text that the
engine logged is never a finding (log_origin.py), nor is what fails after a stop was asked for (starts.py).

Speed: an ordinary line is rejected by plain substring checks (the gates) before any regex runs, so
the journal pane can classify hundreds of thousands of lines per second (bench/triage_throughput.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from console.domain.log_origin import by_systemd, is_request_text, names_a_unit
from console.domain.rank import LineHeader, parse_rank, split_header
from console.domain.triage.catalogue import WEIGHTS_OOM_HINT, in_engine_terms
from console.domain.triage.classify import MAX_LINE_CHARS, QUIET_LEVELS, classify_line, finding_of, may_match
from console.domain.triage.normalise import (
    FRAME_MARKER,
    TRACEBACK_MARKER,
    Block,
    Pending,
    continues,
    exception_name,
    is_frame,
    looks_incomplete,
    may_continue,
    oom_cut,
    open_block,
)
from console.domain.triage.open_world import end_of_log, open_world
from console.domain.triage.root_cause import CAUSE_WINDOW_LINES, decisive, outlived
from console.domain.triage.signature_table import read_signature
from console.domain.triage.signatures import clip
from console.domain.triage.starts import BY_ENGINE, StartFindings, StartTracker
from console.domain.triage.wraps import WRAP_WIDTH, WrapReader
from console.domain.values import Engine, Finding, FindingClass

__all__ = ["Triager", "classify_line", "decisive", "parse_rank", "triage_lines"]

_BLOCK_LINES = 400  # lines (of any writer) after which an open traceback is dropped: its end never came
_MAX_OPEN_BLOCKS = 64
_TAIL_LINES = 40  # lines (of any writer) after a traceback's final line that may continue its message
#: The engines' words as the weights begin and end loading (SGLang's, vLLM's, and the shards' progress bar).
_LOAD_BEGINS = ("Load weight begin", "Starting to load model", "Loading safetensors checkpoint shards:   0%")
_LOAD_ENDS = ("Load weight end", "Loading weights took", "Model loading took")
#: Lines only a serving engine writes: an answered request (uvicorn's access line), a batch, its throughput.
_SERVING = ('HTTP/1.1" 2', "Decode batch", "Prefill batch", "Avg prompt throughput", "Avg generation throughput")


class Triager:
    """Reads a log stream line by line and reports each failure once per rank.

    Args:
        engine: The engine behind the log, when known: triage reads both engines, and names this one's
            flags in its hints.
        max_remembered: How many distinct findings to remember for de-duplication.

    Attributes:
        start: Which start of the unit the log is in, and the line that began it (starts.py).
    """

    def __init__(self, engine: Engine | None = None, *, max_remembered: int = 4096) -> None:
        self.engine = engine
        self._blocks: dict[str, Block] = {}
        self._tails: dict[str, tuple[FindingClass, int]] = {}
        self._found = StartFindings(max_remembered)
        self._pending: Pending | None = None
        self._loose: Finding | None = None  # an exception line outside any traceback: the end, if the log ends
        self._prev = ""
        self._wrap = WrapReader()  # lines a terminal hard-wrapped (wraps.py)
        self._count = 0
        self._loading_weights = False  # between the engine's words that the weights begin and end loading
        self._unserved: list[Finding] = []  # open-world exceptions no serving line of their writer followed yet
        self.revised: dict[int, Finding] = {}  # seq -> a finding reported fatal, then outlived (every start)
        self.start = StartTracker()

    @property
    def lines_read(self) -> int:
        """How many lines this Triager has read."""
        return self._count

    def reset(self) -> None:
        """Forget open tracebacks and reported findings: call it when the engine starts afresh, so a
        failure that recurs in the new start is reported again."""
        self._blocks.clear()
        self._tails.clear()
        self._found.clear()
        self._pending = None
        self._loose = None
        self._unserved.clear()
        self._loading_weights = False
        self._wrap.joined = None

    def feed(self, line: str, ts: float | None = None, systemd: bool | None = None) -> list[Finding]:
        """Read one line.

        Args:
            line: One log line (a trailing newline is ignored).
            ts: When the line was logged (POSIX seconds), copied into the finding.
            systemd: Whether systemd wrote it, as its journal entry says (True: systemd's own line about
                the unit, False: the unit's output); None for a pasted log, where the line's shape
                decides. systemd's words about the unit count only in systemd's lines.

        Returns:
            The findings this line completes: usually none, at most two (a start's last message, when
            this line begins the next start).
        """
        self._count += 1
        prev, self._prev = self._prev, line
        rest = self._wrap.may_be_rest(line, prev) and self._pending is None
        if began := self.start.read(line, self._count, systemd):
            # The last start has ended: what it was assembling is its own; and when systemd did not say
            # how it ended, what it ended on (a traceback cut off) is too, as at the end of a log.
            out = self.finish() if began == BY_ENGINE else self._flush()
            self.reset()
            return out
        if "oad" in line and ("Load" in line or "load" in line):
            if any(words in line for words in _LOAD_BEGINS):
                self._loading_weights = True
            elif any(words in line for words in _LOAD_ENDS):
                self._loading_weights = False
        if self._unserved and ('" 2' in line or "batch" in line or "throughput" in line) and any(
            words in line for words in _SERVING
        ):
            self._went_on_serving(split_header(line.rstrip("\r\n"), deep=True).rank)
        ordinary = not may_match(line)
        if self._count & 15 == 0 and (self._blocks or self._tails or self._unserved):
            self._expire()
        if ordinary and self._pending is None and not rest:
            return []  # the common case: no gate, and no message that this line may continue
        line = line.rstrip("\r\n")
        header = split_header(line, deep=True)
        if is_request_text(header.payload):
            return self._flush()  # a client's or the model's text: never a finding, nor part of one
        out: list[Finding] = []
        # A rest is joined unless it names a class on its own (a line of its own after a long one).
        if rest and header.stream not in self._blocks and (ordinary or read_signature(header.payload, None) is None) and (
            whole := self._wrap.read_rest(prev, header)
        ):
            return self._plain_line(whole[0], whole[1], ts) if may_match(whole[1].payload) else []
        pending = self._pending
        if pending is not None:
            if continues(pending, header, len(line)):
                if pending.extend(header.payload, len(line)):
                    self._settle(pending)
                return out
            out += self._flush()
        payload = header.payload
        if TRACEBACK_MARKER in payload:
            block = self._open_block(header, prev)
            return out + self._opening_message(line, header, block, ts)
        block = self._blocks.get(header.stream)
        if block is None and payload[:40].lstrip().startswith(FRAME_MARKER):
            block = self._open_block(header, None)  # an excerpt that starts inside a traceback
        if block is not None:
            done, found = self._continue_block(block, line, header, ts)
            if done:
                return out + found
        if ordinary:
            return out
        if payload.lstrip().startswith("what():"):
            return out + self._start_pending(line, header, header.rank, ts, None, payload.lstrip())
        return out + self._plain_line(line, header, ts, by_systemd(header, systemd, about_unit=True))

    # -- tracebacks ---------------------------------------------------------------------------------

    def _open_block(self, header: LineHeader, prev: str | None) -> Block:
        """Open a traceback at its marker, or (prev None) at a frame: an excerpt that starts inside one,
        whose opening is not known."""
        self._tails.pop(header.stream, None)
        if len(self._blocks) >= _MAX_OPEN_BLOCKS:
            self._blocks.pop(next(iter(self._blocks)))
        block = self._blocks[header.stream] = open_block(header, prev, self._count)
        return block

    def _opening_message(self, line: str, header: LineHeader, block: Block, ts: float | None) -> list[Finding]:
        """The message before a traceback's marker: vLLM's `Exception in worker ... while processing
        method init_device: NCCL error: ..., Traceback ...` names the cause there."""
        before = header.payload.split(TRACEBACK_MARKER, 1)[0]
        handled = block.handled or len(before) < 12 or not may_match(before)
        finding = None if handled else finding_of(before.strip(), line, header.rank, header.level, ts, self._count, None)
        return self._report(finding) if finding is not None and finding.fatal else []

    def _expire(self) -> None:
        """Drop tracebacks whose final line never came, and tails that ran out."""
        for stream in [k for k, b in self._blocks.items() if self._count - b.opened_at > _BLOCK_LINES]:
            del self._blocks[stream]
        for stream in [k for k, t in self._tails.items() if self._count - t[1] > _TAIL_LINES]:
            del self._tails[stream]
        # An exception this far back explains no death any more (root_cause.CAUSE_WINDOW_LINES).
        self._unserved = [f for f in self._unserved if f.seq is None or self._count - f.seq <= CAUSE_WINDOW_LINES]

    def _continue_block(
        self, block: Block, line: str, header: LineHeader, ts: float | None
    ) -> tuple[bool, list[Finding]]:
        """Advance an open traceback; (True, findings) when this line was part of it."""
        payload = header.payload
        if is_frame(payload):
            block.note_frame(payload, self._count, len(line))
            return True, []
        name = exception_name(payload)
        if name is None:
            if not header.tagged and block.wrapped:  # the rest of a long frame, wrapped
                block.note_frame(payload, self._count, len(line), piece=True)
                return True, []
            if not header.tagged:
                del self._blocks[header.stream]  # an untagged line that is no exception: not a traceback
            return False, []  # a line of another rank, logged in between
        del self._blocks[header.stream]
        if block.handled or "serving_" in line[: len(line) - len(payload)]:
            return True, []  # a request's error, answered by a running server
        return True, self._start_pending(line, header, header.rank or block.rank, ts, block, payload)

    # -- messages that may continue on the next lines ----------------------------------------------

    def _start_pending(
        self, line: str, header: LineHeader, rank: str | None, ts: float | None, block: Block | None, text: str
    ) -> list[Finding]:
        """Read a message that may continue on the next lines. Report it now (a live journal never
        wraps, and a switch must see the exception at once), and hold it while the next lines may
        continue it: a wrapped rest may name its class, which is then reported too. Only an OOM whose
        figures were cut off waits for them before it is reported."""
        level = block.level if block is not None and block.level else header.level
        pending = Pending(header.stream, rank, level, ts, self._count, line, block, text, len(line))
        self._settle(pending)
        out: list[Finding] = []
        waits = oom_cut(pending.finding, pending.text) if pending.finding is not None else True
        if text.startswith("terminate called"):
            waits = True  # its what() follows at once, and usually names the cause
        waits = waits and may_continue(pending)  # a short line has no wrapped rest to wait for
        if pending.finding is not None and not waits:
            self._remember_tail(pending)
            out = self._report(pending.finding)
            pending.reported = pending.finding.cls
        if looks_incomplete(pending):
            self._pending = pending
        return out

    def _settle(self, pending: Pending) -> None:
        """Classify the message as it stands (it may have grown by a continued line)."""
        finding = finding_of(pending.text, pending.line, pending.rank, pending.level, pending.ts, pending.seq,
                           pending.block)
        if finding is None:
            finding = open_world(pending)
        pending.finding = finding

    def _flush(self) -> list[Finding]:
        """The held message is complete: report it, unless it was reported already as what it is."""
        pending, self._pending = self._pending, None
        if pending is None or pending.finding is None or pending.finding.cls is pending.reported:
            return []
        self._remember_tail(pending)
        return self._report(pending.finding)

    def _remember_tail(self, pending: Pending) -> None:  # the stream's last class, for its continued lines
        if pending.finding is not None:
            self._tails[pending.stream] = (pending.finding.cls, self._count)

    # -- lines outside tracebacks -------------------------------------------------------------------

    def _plain_line(self, line: str, header: LineHeader, ts: float | None, systemd: bool = False) -> list[Finding]:
        payload = header.payload
        if payload[:1] in (" ", "\t"):
            if payload[:1] == "\t" or payload[1:2] in (" ", "\t"):
                return []  # a frame or quoted source code (indented two or more), not a message
            payload = payload[1:]  # one space: the rest of a line wrapped at a word
        tail = self._tails.get(header.stream)
        rank = header.rank
        finding = finding_of(payload, line, rank, header.level, ts, self._count, None, systemd=systemd)
        if finding is None:
            if header.level not in QUIET_LEVELS and exception_name(payload) is not None and ": " in payload:
                self._loose = Finding(FindingClass.TRACEBACK, line[:MAX_LINE_CHARS],
                                      f"Python exception: {clip(payload, 150)}", rank, False, ts=ts, seq=self._count)
                if len(line) >= WRAP_WIDTH:  # its wrapped rest may name its class
                    return self._start_pending(line, header, rank, ts, None, payload)
            self._wrap.open_head = len(line) >= WRAP_WIDTH and header.level not in QUIET_LEVELS
            return []
        if tail is not None and finding.cls == tail[0] and not names_a_unit(payload):
            return []  # the same error's message, continued (NCCL's `ncclUnhandledCudaError: ...`)
        if oom_cut(finding, payload) or payload.startswith("terminate called"):
            return self._start_pending(line, header, rank, ts, None, payload)
        return self._report(finding)

    def _report(self, finding: Finding | None) -> list[Finding]:
        if finding is not None and finding.fatal and self.start.stopping:
            finding = replace(finding, fatal=False)
        if finding is not None and finding.cls is FindingClass.CUDA_OOM and self._loading_weights:
            finding = replace(finding, hint=WEIGHTS_OOM_HINT)  # no memory flag helps weights that do not fit
        if finding is None or not self._found.add(finding := in_engine_terms(finding, self.engine)):
            return []
        self.start.note(finding)
        if finding.cls in (FindingClass.ENGINE_ERROR, FindingClass.TRACEBACK):
            self._unserved.append(finding)
        return [finding]

    def _went_on_serving(self, rank: str | None) -> None:
        """The writer of an open-world exception went on serving after it: the exception did not end the
        process (aiohttp's or a handler's error of one request), so it is a note that explains no death."""
        for finding in [f for f in self._unserved if f.rank == rank]:
            self._unserved.remove(finding)
            history = self._found.history
            at = next((i for i, f in enumerate(history) if f is finding), None)
            if at is not None:
                history[at] = outlived(finding)
                if finding.seq is not None and len(self.revised) < 4096:
                    self.revised[finding.seq] = history[at]

    # -- the end of a log, and its decisive finding -------------------------------------------------

    def finish(self) -> list[Finding]:
        """The log has ended: return the findings that completes (what it was still assembling, and
        what it ended on when no cause is named: open_world.end_of_log)."""
        out = self._flush()
        return out + self._report(end_of_log(self._found.history, self._loose, self._blocks.values(), self._count))

    def findings(self) -> list[Finding]:
        """Every finding of the current start (reported since the last reset), oldest first (the last 512)."""
        return list(self._found.history)

    def decisive(self) -> Finding | None:
        """The root cause of the failure read so far, with its consequences folded under it."""
        if self._pending is not None:
            self._flush()
        return decisive(self._found.history)


def triage_lines(lines: Iterable[str], engine: Engine | None = None) -> list[Finding]:
    """All findings of a log (its `lines`, from `engine` when known), in order, each failure once per rank."""
    triager = Triager(engine)
    out = [finding for line in lines for finding in triager.feed(line)]
    return out + triager.finish()
