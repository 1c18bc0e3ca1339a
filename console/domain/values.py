"""Typed, frozen values that flow from hosts to the ops layer and the UI.

Units are in field names (`_mib`, `_bytes`, `_s`). A missing value is `None`, never a magic string.
Timestamps are POSIX seconds (float) unless the name says otherwise.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Engine(enum.StrEnum):
    """The serving engine behind a service."""

    SGLANG = "sglang"
    VLLM = "vllm"
    OPENAI = "openai"  # any OpenAI-compatible server: no engine-specific rules


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant, as nvidia-smi, NVML or the simulated ledger reports it."""

    index: int
    uuid: str | None = None
    name: str | None = None
    total_mib: int | None = None
    used_mib: int | None = None
    util_pct: int | None = None
    temp_c: int | None = None
    pci_bus_id: str | None = None
    power_w: float | None = None
    xid: int | None = None
    """The last Xid error the driver reported for this GPU (dcgm-exporter); None when none or unknown."""


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process holding memory on one GPU."""

    pid: int
    gpu_uuid: str | None = None
    gpu_index: int | None = None
    used_mib: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """All GPUs of one host from one sample; `error` says why the sample is empty or partial."""

    taken_at: float
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class UnitState:
    """A systemd unit's state (or the process manager's equivalent).

    `active` is systemd's ActiveState (active, activating, deactivating, inactive, failed);
    `sub` its SubState (running, exited, dead, failed, auto-restart, ...); `result` its Result
    (success, exit-code, signal, oom-kill, start-limit-hit, ...).
    """

    unit: str
    active: str
    sub: str = ""
    result: str | None = None
    load: str | None = None  # LoadState: loaded, not-found, masked
    main_pid: int | None = None
    exec_main_status: int | None = None
    n_restarts: int | None = None
    since: float | None = None  # when ActiveState last changed

    @property
    def is_failed(self) -> bool:
        return self.active == "failed" or (
            self.result not in (None, "", "success") and self.active != "active"
        )

    @property
    def is_running(self) -> bool:
        return self.active in ("active", "activating", "reloading")


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal entry of a unit; `cursor` resumes a stream exactly after it."""

    cursor: str
    ts: float  # __REALTIME_TIMESTAMP in seconds
    unit: str
    message: str
    pid: int | None = None
    priority: int | None = None  # syslog priority: 3 err, 4 warning, 6 info
    source: str = "unit"  # "unit" for the service's own output, "systemd" for the manager's lines

    @property
    def by_systemd(self) -> bool:
        """Whether systemd wrote the entry (its own line about the unit), not the unit's process."""
        return self.source == "systemd"


class Phase(enum.StrEnum):
    """Start-up phases of an engine, in order; FAILED and STOPPED end a start."""

    STOPPED = "stopped"
    STARTING = "starting"
    INIT_DISTRIBUTED = "init_distributed"
    LOADING_WEIGHTS = "loading_weights"
    KV_CACHE = "kv_cache"
    CUDA_GRAPHS = "cuda_graphs"
    HTTP_UP = "http_up"
    WARMING_UP = "warming_up"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ReadinessEvent:
    """A start-up milestone seen in the log (or the health probe)."""

    phase: Phase
    ts: float
    detail: str = ""
    progress: float | None = None  # 0..1 within the phase (shard loading)
    rank: str | None = None


class FindingClass(enum.StrEnum):
    """Classes of failure that triage recognises (shared/facts/engines.md, console/domain/triage/catalogue.py)."""

    CUDA_OOM = "cuda_oom"
    KV_CACHE_TOO_SMALL = "kv_cache_too_small"
    MEMORY_IN_USE = "memory_in_use"
    ENGINE_INIT = "engine_init"
    CUDA_GRAPH = "cuda_graph"
    NCCL = "nccl"
    NCCL_TIMEOUT = "nccl_timeout"
    PORT_IN_USE = "port_in_use"
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    WEIGHT_LOAD_ERROR = "weight_load_error"
    UNSUPPORTED_ARCHITECTURE = "unsupported_architecture"
    HF_ACCESS = "hf_access"
    NO_KERNEL_IMAGE = "no_kernel_image"
    QUANTIZATION_UNSUPPORTED = "quantization_unsupported"
    SHM_EXHAUSTED = "shm_exhausted"
    SEGFAULT = "segfault"
    HOST_OOM = "host_oom"
    COMPILE_ERROR = "compile_error"
    CUDA_DRIVER_TOO_OLD = "cuda_driver_too_old"
    MAX_MODEL_LEN = "max_model_len"
    DISK_FULL = "disk_full"
    GPU_XID = "gpu_xid"
    NVSHMEM_INIT = "nvshmem_init"  # NVSHMEM (DeepEP's transport) could not initialise
    DEEPEP_TIMEOUT = "deepep_timeout"  # DeepEP's dispatch/combine waited in vain for another EP rank
    GLOO = "gloo"  # Gloo, the CPU process group, could not reach another rank
    ENGINE_WATCHDOG = "engine_watchdog"  # the engine's own watchdog gave up on a hung forward and killed it
    KV_TRANSFER = "kv_transfer"  # a disaggregated deployment's KV cache could not move (Mooncake, NIXL)
    ENGINE_DIED = "engine_died"  # an engine process gone without an error of its own (a kill, a native crash)
    ENGINE_ERROR = "engine_error"  # a fatal end no signature names: the exception, signal or abort itself
    UNIT_FAILED = "unit_failed"
    TRACEBACK = "traceback"  # an unclassified Python traceback's final exception line, not (yet) fatal


@dataclass(frozen=True, slots=True)
class OomFigures:
    """Figures parsed from a CUDA OOM message, in bytes. `gpu` is in CUDA order."""

    gpu: int | None
    tried_bytes: int | None
    total_bytes: int | None
    free_bytes: int | None
    in_use_bytes: int | None
    allocated_bytes: int | None = None
    reserved_unallocated_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A triaged log line: what happened, in plain words, with its numbers.

    Attributes:
        cls: The failure class.
        line: The log line (or the rejoined message) it was read from.
        summary: Plain words, with the figures.
        rank: The parallel rank the line's prefix names.
        fatal: Whether it ends the start.
        oom: The figures of a CUDA OOM.
        ts: When the line was logged (POSIX seconds).
        hint: What to do about it (console/domain/triage/catalogue.py).
        context: What the engine was doing when it happened (an OOM during CUDA-graph capture: cuda_graph).
        consequences: The findings this root cause explains (the decisive finding only).
        seq: The number of the line in the stream the Triager read (1 = the first).
    """

    cls: FindingClass
    line: str
    summary: str
    rank: str | None = None
    fatal: bool = True
    oom: OomFigures | None = None
    ts: float | None = None
    hint: str | None = None
    context: FindingClass | None = None
    consequences: tuple[Finding, ...] = ()
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape used by `triage --json` and switch's `failure` object."""
        out: dict[str, Any] = {
            "class": self.cls.value,
            "kind": self.cls.value,
            "summary": self.summary,
            "line": self.line,
            "rank": self.rank,
            "fatal": self.fatal,
        }
        if self.oom is not None:
            out.update(asdict(self.oom))
        if self.ts is not None:
            out["ts"] = self.ts
        if self.hint is not None:
            out["hint"] = self.hint
        if self.context is not None:
            out["context"] = self.context.value
        if self.seq is not None:
            out["line_no"] = self.seq
        if self.consequences:
            out["consequences"] = [
                {"class": c.cls.value, "summary": c.summary, "rank": c.rank, "line_no": c.seq}
                for c in self.consequences
            ]
        return out


@dataclass(frozen=True, slots=True)
class HealthSample:
    """One readiness probe of a service's HTTP endpoint.

    `status` is one of: "down" (connection refused or timed out), "starting" (503 or other non-200),
    "ready" (/health 200). `models_ok` records /v1/models separately: it is never readiness alone.
    """

    taken_at: float
    status: str
    http_status: int | None = None
    latency_s: float | None = None
    error: str | None = None
    models_ok: bool | None = None


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The outcome of one remote or local command run from an argv list."""

    argv: tuple[str, ...]
    exit_status: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True, slots=True)
class HostStatus:
    """Reachability of a host, for fleet views: `age_s` is the age of the newest data."""

    host: str
    reachable: bool
    error: str | None = None
    last_ok_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
