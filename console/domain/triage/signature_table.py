"""Every failure signature, in the order they are tried, and the gates that let an ordinary line pass.

The first signature whose needle is in the message and whose reader accepts it wins, so the more
specific come first: a CUDA-graph failure may quote an OOM, an NCCL watchdog may report an illegal
memory access, a bus error is shared memory before it is a crash.

`exception_needles` are words that only ever appear inside an exception's message (after
`ValueError: ` and the like): they are matched only on a line that also holds "rror" or "xception",
which are gates, so the cheap prefilter still sees every signature.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.domain.triage import signatures as known
from console.domain.triage import signatures_dist as dist
from console.domain.triage import signatures_env as env
from console.domain.triage import signatures_host as host
from console.domain.triage.oom import OOM_MARKERS
from console.domain.triage.signatures import Reader, Reading
from console.domain.values import FindingClass as C

#: Lines that are never a finding: NCCL's harmless `Call to bind failed: Address already in use`.
HARMLESS = ("Call to bind failed",)


@dataclass(frozen=True, slots=True)
class Signature:
    """One failure class's needles and the reader that confirms a match and summarises it."""

    cls: C
    needles: tuple[str, ...]
    read: Reader
    exception_needles: tuple[str, ...] = ()
    systemd: bool = False  # systemd's own words about the unit: read only in systemd's lines


SIGNATURES: tuple[Signature, ...] = (
    Signature(C.CUDA_GRAPH, ("Capture cuda graph failed", "Capture CUDA graph failed", "CUDA graph capture failed",
                            "disable cuda graph by --disable-cuda-graph", "Piecewise CUDA Graph failed",
                            "add --disable-piecewise-cuda-graph"),
              known.cuda_graph,
              ("operation not permitted when stream is capturing", "cudaErrorStreamCapture",
               "a previous error during capture", "during CUDA graph capture", "cudaStreamCaptureStatusActive")),
    Signature(C.CUDA_OOM, OOM_MARKERS, known.cuda_oom, ("CUBLAS_STATUS_ALLOC_FAILED",)),
    # The engines' own words, whole: a quoted or wrapped message may have lost its `ValueError: `.
    Signature(C.KV_CACHE_TOO_SMALL, (
        "is larger than the profiled value", "stored in KV cache",
        "Not enough memory. Please try to increase --mem-fraction-static", "leave no GPU memory for the KV cache",
        "No available memory for the cache blocks", "KV cache is needed, which is larger than the available KV cache memory",
        *known.ZERO_BLOCKS,
    ), known.kv_cache, ("To serve at least one request with the model",)),
    Signature(C.MEMORY_IN_USE, (), known.memory_in_use, (
        "on startup is less than desired GPU memory", "memory capacity is unbalanced", "Error in memory profiling",
    )),
    Signature(C.MAX_MODEL_LEN, (), env.max_model_len, ("is greater than the derived",)),
    Signature(C.NO_KERNEL_IMAGE, (), env.no_kernel_image, (
        "no kernel image is available", "cudaErrorNoKernelImageForDevice", "device kernel image is invalid",
    )),
    Signature(C.ILLEGAL_MEMORY_ACCESS, ("illegal memory access",), known.illegal_access,
              ("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS")),
    Signature(C.CUDA_DRIVER_TOO_OLD, (), env.cuda_driver_too_old, (
        "CUDA driver version is insufficient", "driver on your system is too old", "cudaErrorInsufficientDriver",
        "unsupported display driver / cuda driver combination", "forward compatibility was attempted",
    )),
    Signature(C.GPU_XID, ("NVRM: Xid", "NVRM: GPU", "ECC error"), host.gpu_xid,
              ("fallen off the bus", "cudaErrorECCUncorrectable")),
    Signature(C.HF_ACCESS, ("HFValidationError", "GatedRepoError", "RepositoryNotFoundError",
                            "LocalEntryNotFoundError", "401 Client Error", "403 Client Error"), env.hf_access, (
        "Repo id must", "Repository Not Found", "gated repo", "is not a valid model identifier",
        "Invalid user token", "Access to model", "couldn't connect to 'https://huggingface.co'",
    )),
    Signature(C.UNSUPPORTED_ARCHITECTURE, (), env.unsupported_architecture, (
        "are not supported for now", "is not supported for now", "failed to be inspected",
        "Cannot inspect model architecture", "does not recognize this architecture", "Unrecognized model",
    )),
    Signature(C.QUANTIZATION_UNSUPPORTED, ("Minimum capability",), env.quantization_unsupported,
              ("quantization method", "Unknown quantization", "quantization is not supported")),
    Signature(C.WEIGHT_LOAD_ERROR, (), known.parameter_key, ("KeyError: '",)),
    Signature(C.WEIGHT_LOAD_ERROR, ("SafetensorError", "Error while deserializing header", "FileNotFoundError",
                                    "Error(s) in loading state_dict"), known.weight_load, (
        "size mismatch for", "Attempted to load weight", "Cannot find any model weights",
        "is not divisible by weight quantization block", "There is no module or parameter named",
        "weights were not initialized from checkpoint", "Missing key(s) in state_dict",
    )),
    Signature(C.COMPILE_ERROR, ("CompilationError", "InductorError", "BackendCompilerFailed",
                                "LoweringException", "PassManager::run failed"), env.compile_error,
              ("OutOfResources", "out of resource", "ptxas")),
    Signature(C.SHM_EXHAUSTED, ("Bus error", "bus error", "SIGBUS"), host.shm_exhausted,
              ("/dev/shm", "shared memory")),
    Signature(C.DISK_FULL, ("[Errno 28]",), host.disk_full, ("No space left on device", "Disk quota exceeded")),
    Signature(C.NVSHMEM_INIT, ("nvshmem", "NVSHMEM"), dist.nvshmem_init),
    Signature(C.KV_TRANSFER, dist.KV_TRANSFER_NEEDLES, dist.kv_transfer),
    Signature(C.KV_TRANSFER, ("Handshake with ",), dist.handshake),
    Signature(C.DEEPEP_TIMEOUT, ("DeepEP",), dist.deepep_timeout),
    Signature(C.ENGINE_WATCHDOG, ("atchdog timeout (self.watchdog_timeout=", "RPC call to "), dist.engine_watchdog),
    Signature(C.GLOO, ("connectFullMesh failed", "gloo/", "ProcessGroupGloo"), dist.gloo),
    Signature(C.NCCL_TIMEOUT, ("Watchdog caught collective operation timeout", "watchdog got stuck"),
              known.nccl_timeout, ("collective operation timeout",)),
    Signature(C.NCCL, ("NCCL error", "NCCL Error", "NCCL WARN", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                       "ncclRemoteError", "ncclInvalidUsage", "ncclInvalidArgument"), known.nccl,
              ("unhandled cuda error", "unhandled system error", "NCCL communicator was aborted",
               "setting up NCCL communicator")),
    Signature(C.PORT_IN_USE, ("[Errno 98]", "rror: Address already in use"), known.port_in_use,
              ("ddress already in use", "is used by a process already", "is not available in",
               "is already in use", "EADDRINUSE", "code: -98")),
    Signature(C.SEGFAULT, ("error: Segmentation fault", "Segmentation fault (core dumped)", "segfault at", "SIGSEGV",
                           "Segfault encountered"),
              host.segfault),
    Signature(C.HOST_OOM, ("killed by the OOM killer", "Out of memory: Killed process", "Killed",
                           "exit code 137", "MemoryError", "what():  std::bad_alloc", "[Errno 12]",
                           "DefaultCPUAllocator: not enough memory", "DefaultCPUAllocator: can't allocate memory",
                           "killed due to memory pressure (OOM)", "which exceeds the memory usage threshold"),
              host.host_oom,
              ("Cannot allocate memory",)),
    Signature(C.ENGINE_INIT, ("Initialization failed. warmup error", "Initialization failed. Please see",
                              "EngineCore failed to start", "Engine process failed to start",
                              "Received sigquit from a child process"), known.engine_init,
              ("Engine core initialization failed", "WorkerProc initialization failed", "See root cause above",
               "See stack trace for root cause")),
    Signature(C.ENGINE_DIED, ("exited unexpectedly", "died unexpectedly", "DataParallelController"),
              host.engine_died),
    Signature(C.ENGINE_ERROR, ("Fatal Python error", "terminate called after throwing", "what():",
                               "died, exit code", "SIGABRT", "SIGILL", "SIGFPE", "core dumped"), host.fatal_end),
    Signature(C.UNIT_FAILED, ("Main process exited, code=", "Failed with result '", "Start request repeated too quickly",
                              "Failed at step", "Failed to execute"), host.unit_failed, systemd=True),
)

#: Short substrings such that every needle contains one (a unit test checks it), and "rror" and
#: "xception" for the exception needles: the cheap first test of every line, a few substring scans.
GATES: tuple[str, ...] = (
    "rror", "xception", "emory", "ailed", "nccl", "atchdog", "Errno", "SIG", "illed", "apability", "profiled",
    "Main process", "Start request", "sigquit", "terminate", "what():", "dumped", "exit code", "NVRM",
    "egfault", "in KV cache", "cuda-graph", " blocks: 0,", "NCCL WARN", "OUT_OF_MEMORY", "nexpectedly",
    "DataParallelController", "nvshmem", "NVSHMEM", "DeepEP", "gloo/", "Gloo", "KVTransfer", "ooncake", "NIXL",
    "andshake", "metadata not found", "RPC call to",
)
#: Every needle of every signature.
ALL_NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(n for sig in SIGNATURES for n in sig.needles))


def read_signature(text: str, rank: str | None, *, systemd: bool = False) -> tuple[C, Reading] | None:
    """The first signature that matches a message, with its reading (its class may differ from the
    signature's: see Reading.cls); None for an ordinary message. systemd's own words about the unit
    are read only in a line systemd wrote (`systemd`), never in an engine's text."""
    for needle in HARMLESS:
        if needle in text:
            return None
    in_exception = "rror" in text or "xception" in text
    for sig in SIGNATURES:
        if sig.systemd and not systemd:
            continue
        hit = any(needle in text for needle in sig.needles) or (
            in_exception and any(needle in text for needle in sig.exception_needles)
        )
        if hit:
            reading = sig.read(text, rank)
            if reading is not None:
                return reading.cls or sig.cls, reading
    return None
