"""Engine start-up milestones -> readiness phases (shared/facts/engines.md, "Start-up milestones").

`PhaseTracker` is the source of truth for "ready": the engine's own ready line
(`The server is fired up and ready to roll!` for SGLang, `Application startup complete.` after
`Starting vLLM API server` for vLLM) or a healthy `/health`. `/v1/models` answering is never
readiness: SGLang serves it before its warm-up request has gone through.

Phases only move forward within one start. All ranks log the same milestones at slightly different
times, so a late rank's `Init torch distributed begin.` does not pull the phase back. A new start
(systemd's `Started ...`, SGLang's `server_args=`, vLLM's version banner, or an early milestone
after the previous start ended in ready/failed/stopped) begins again from the start.

Milestones are read in their writer's own lines only (log_origin.py): systemd's in systemd's lines,
the engine's in the engine's, and none in a request's text that the engine logged, so a prompt that
quotes `The server is fired up` or `Main process exited` moves no phase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.domain.log_origin import by_systemd, is_logged_request
from console.domain.rank import LineHeader, split_header
from console.domain.values import Engine, HealthSample, Phase, ReadinessEvent

_ORDER = {phase: i for i, phase in enumerate(Phase)}
_ENDED = (Phase.READY, Phase.FAILED, Phase.STOPPED)
# tqdm bars: "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:10<00:12, ...]" and
# "Capturing batches (bs=8 avail_mem=9.1 GB):  45%|████▌     | 23/52 [00:03<00:04, ...]".
_BAR = re.compile(r"\d{1,3}%(?: Completed \||\|[^|\n]{0,80}\|)\s{0,4}(\d{1,7})/(\d{1,7})")
_MAIN_EXIT_STATUS = re.compile(r"Main process exited, code=(\w+), status=(\d+)")


@dataclass(frozen=True, slots=True)
class Milestone:
    """A log text that marks a phase.

    Attributes:
        needle: The substring to look for.
        phase: The phase it marks.
        detail: What to tell the user.
        starts: It may begin a new start after the previous one ended (or always, for STARTING).
        after: It only counts once this phase is reached (`Application startup complete.` is also
            logged by SGLang's uvicorn, and `POST /generate` by ordinary traffic).
        progress: A fixed progress within the phase (1.0 for "... end" lines).
        bar: The line carries a tqdm bar whose n/total is the progress.
        at_start: The needle must open the message (systemd's `Started x.service`, not uvicorn's
            `INFO:     Started server process`).
        systemd: systemd's own milestone about the unit, read only in systemd's lines.
    """

    needle: str
    phase: Phase
    detail: str
    starts: bool = False
    after: Phase | None = None
    progress: float | None = None
    bar: bool = False
    at_start: bool = False
    systemd: bool = False


_SYSTEMD = (
    Milestone("Started ", Phase.STARTING, "unit started", starts=True, at_start=True, systemd=True),
    Milestone("Stopped ", Phase.STOPPED, "unit stopped", at_start=True, systemd=True),
    Milestone("Deactivated successfully", Phase.STOPPED, "unit stopped", systemd=True),
    Milestone("Main process exited, code=", Phase.FAILED, "main process exited", systemd=True),
    Milestone("Failed with result '", Phase.FAILED, "unit failed", systemd=True),
)

_SGLANG = (
    Milestone("server_args=ServerArgs(", Phase.STARTING, "launcher started", starts=True),
    Milestone("Init torch distributed begin", Phase.INIT_DISTRIBUTED, "init torch distributed", starts=True),
    Milestone("Load weight begin", Phase.LOADING_WEIGHTS, "loading weights", starts=True, progress=0.0),
    Milestone("checkpoint shards:", Phase.LOADING_WEIGHTS, "loading weights", bar=True),
    Milestone("Multi-thread loading shards:", Phase.LOADING_WEIGHTS, "loading weights", bar=True),
    Milestone("Load weight end", Phase.LOADING_WEIGHTS, "weights loaded", progress=1.0),
    Milestone("KV Cache is allocated", Phase.KV_CACHE, "KV cache allocated"),
    Milestone("Memory pool end", Phase.KV_CACHE, "memory pool ready"),
    Milestone("Capture cuda graph begin", Phase.CUDA_GRAPHS, "capturing CUDA graphs", progress=0.0),
    Milestone("Capturing batches", Phase.CUDA_GRAPHS, "capturing CUDA graphs", bar=True),
    Milestone("Capture cuda graph end", Phase.CUDA_GRAPHS, "CUDA graphs captured", progress=1.0),
    Milestone("Uvicorn running on", Phase.HTTP_UP, "HTTP server up"),
    Milestone("/get_model_info", Phase.WARMING_UP, "warming up", after=Phase.HTTP_UP),
    Milestone("POST /generate", Phase.WARMING_UP, "warming up", after=Phase.HTTP_UP),
    Milestone("Prefill batch", Phase.WARMING_UP, "warming up", after=Phase.HTTP_UP),
    Milestone("The server is fired up and ready to roll", Phase.READY, "ready"),
    Milestone("Initialization failed. warmup error", Phase.FAILED, "warm-up failed"),
    Milestone("Received sigquit from a child process", Phase.FAILED, "a scheduler process failed"),
)

_VLLM = (
    Milestone("vLLM API server version", Phase.STARTING, "API server started", starts=True),
    Milestone("vLLM server version", Phase.STARTING, "API server started", starts=True),  # 0.11+, no logo
    Milestone("█  version ", Phase.STARTING, "API server started", starts=True),  # 0.11+: its logo
    Milestone("Initializing a V1 LLM engine", Phase.INIT_DISTRIBUTED, "initialising engine", starts=True),
    Milestone("is assigned as DP rank", Phase.INIT_DISTRIBUTED, "init distributed", starts=True),
    Milestone("Starting to load model", Phase.LOADING_WEIGHTS, "loading weights", starts=True, progress=0.0),
    Milestone("checkpoint shards:", Phase.LOADING_WEIGHTS, "loading weights", bar=True),
    Milestone("Loading weights took", Phase.LOADING_WEIGHTS, "weights loaded", progress=1.0),
    Milestone("Model loading took", Phase.LOADING_WEIGHTS, "weights loaded", progress=1.0),
    Milestone("Memory profiling takes", Phase.KV_CACHE, "profiling memory"),
    Milestone("Available KV cache memory", Phase.KV_CACHE, "KV cache sized"),
    Milestone("GPU KV cache size", Phase.KV_CACHE, "KV cache allocated"),
    Milestone("CPU KV cache size", Phase.KV_CACHE, "KV cache allocated"),  # vLLM's CPU build
    Milestone("Capturing CUDA graph", Phase.CUDA_GRAPHS, "capturing CUDA graphs", bar=True),
    Milestone("Capturing cudagraphs", Phase.CUDA_GRAPHS, "capturing CUDA graphs"),  # vLLM 0.5/0.6
    Milestone("Graph capturing finished", Phase.CUDA_GRAPHS, "CUDA graphs captured", progress=1.0),
    Milestone("Starting vLLM API server", Phase.HTTP_UP, "API server starting"),
    Milestone("Starting vLLM server", Phase.HTTP_UP, "API server starting"),
    Milestone("Application startup complete.", Phase.READY, "ready", after=Phase.HTTP_UP),
    Milestone("Engine core initialization failed", Phase.FAILED, "engine init failed"),
)

MILESTONES: dict[Engine, tuple[Milestone, ...]] = {
    Engine.SGLANG: _SGLANG + _SYSTEMD,
    Engine.VLLM: _VLLM + _SYSTEMD,
    Engine.OPENAI: _SYSTEMD,
}


class PhaseTracker:
    """Follows one service's log and says which start-up phase its engine is in.

    Args:
        engine: The engine whose milestones to read.

    Attributes:
        phase: The current phase (STOPPED until a milestone is seen).
        progress: Progress within the phase, 0..1, when the phase has one.
        rank: The rank whose line moved the phase last.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = Engine(engine)
        self.phase = Phase.STOPPED
        self.progress: float | None = None
        self.rank: str | None = None
        self._milestones = MILESTONES[self.engine]

    @property
    def ready(self) -> bool:
        """True once the engine said it is ready (or /health answered 200)."""
        return self.phase is Phase.READY

    def feed(self, line: str, ts: float, systemd: bool | None = None) -> ReadinessEvent | None:
        """Read one log line.

        Args:
            line: One line of the service's log (journal prefix allowed).
            ts: When it was logged (POSIX seconds).
            systemd: Whether systemd wrote it, as its journal entry says; None for a pasted log, where
                the line's shape decides (log_origin.by_systemd).

        Returns:
            An event when the phase moves or its progress grows, else None.
        """
        for milestone in self._milestones:
            if milestone.needle in line:
                break
        else:
            return None
        header = split_header(line)
        payload = header.payload
        writer: LineHeader | None = None  # every prefix off: who wrote it, and whether it is a request
        for milestone in self._milestones:
            if milestone.at_start and not payload.startswith(milestone.needle) or milestone.needle not in payload:
                continue
            current = self.phase
            if milestone.after is not None and (current in _ENDED or _ORDER[current] < _ORDER[milestone.after]):
                continue  # e.g. ordinary traffic's `POST /generate`, once the start has ended
            if writer is None:
                writer = split_header(line, deep=True)
                if is_logged_request(writer.payload):
                    return None  # a request's text that the engine logged: a client's words, no milestone
            if milestone.systemd != by_systemd(writer, systemd, about_unit=not milestone.at_start):
                continue  # systemd's milestones in systemd's lines only, the engine's in the engine's
            event = self._apply(milestone, payload, header.rank, ts)
            if event is not None:
                return event
        return None

    def feed_health(self, sample: HealthSample) -> ReadinessEvent | None:
        """Read one health probe: `/health` answering 200 means ready; `/v1/models` alone never does."""
        if sample.status != "ready" or self.phase is Phase.READY:
            return None
        return self._move(Phase.READY, sample.taken_at, "/health answered 200", None, None)

    def mark_failed(self, ts: float, detail: str, rank: str | None = None) -> ReadinessEvent | None:
        """End the start as failed (for a fatal finding seen by the caller)."""
        if self.phase is Phase.FAILED:
            return None
        return self._move(Phase.FAILED, ts, detail, None, rank)

    def _apply(self, milestone: Milestone, payload: str, rank: str | None, ts: float) -> ReadinessEvent | None:
        target = milestone.phase
        current = self.phase
        if target is Phase.FAILED and not _is_failure(payload):
            return None
        progress = milestone.progress
        detail = milestone.detail
        if milestone.bar:
            bars = _BAR.findall(payload)  # a tqdm line may hold several \r-separated updates
            if not bars:
                return None
            done, total = (int(x) for x in bars[-1])
            if total == 0 or done > total:
                return None
            progress = done / total
            detail = f"{detail} {done}/{total}"
        if target in (Phase.STOPPED, Phase.FAILED):
            # A failed start stays failed when systemd then deactivates the unit (vLLM's API server exits 0
            # once its engine core died): only a new start leaves FAILED.
            if current is target or (target is Phase.STOPPED and current is Phase.FAILED):
                return None
            return self._move(target, ts, detail, None, rank)
        if target is Phase.STARTING and milestone.starts:
            return None if current is Phase.STARTING else self._move(target, ts, detail, None, rank)
        if current in _ENDED and current is not Phase.STOPPED and not milestone.starts:
            return None  # a straggler line of the start that already ended
        if current in _ENDED or _ORDER[target] > _ORDER[current]:
            return self._move(target, ts, detail, progress, rank)
        if target is current and progress is not None and (self.progress is None or progress > self.progress):
            return self._move(target, ts, detail, progress, rank)
        return None

    def _move(
        self, phase: Phase, ts: float, detail: str, progress: float | None, rank: str | None
    ) -> ReadinessEvent:
        self.phase = phase
        self.progress = progress
        self.rank = rank
        return ReadinessEvent(phase=phase, ts=ts, detail=detail, progress=progress, rank=rank)


def _is_failure(payload: str) -> bool:
    """systemd's exit lines also report clean exits; only failures end a start as failed."""
    if "Failed with result 'success'" in payload:
        return False
    m = _MAIN_EXIT_STATUS.search(payload)
    return not (m and m.group(1) == "exited" and m.group(2) == "0")
