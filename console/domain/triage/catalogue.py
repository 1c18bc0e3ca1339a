"""The catalogue of failure classes: what each means in plain words, what to do, and how root it is.

A finding's summary says what this log shows (with its figures); the catalogue says what the class
means and what usually fixes it. `tier` orders causes against consequences when one failure leaves
several findings (console/domain/triage/root_cause.py): a lower tier is nearer the root cause.

A hint that names flags names the engine's own when the engine is known (an SGLang service never hears
of `--gpu-memory-utilization`, a vLLM one never of `--mem-fraction-static`); a log of an unknown
engine gets both spellings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from console.domain.values import Engine, Finding
from console.domain.values import FindingClass as C

#: Tiers, root first: a cause in the engine's resources or inputs; a collective or crash that other
#: causes can provoke; an exception nothing else names; the engine's or systemd's summary of a death.
ROOT, COLLATERAL, OPEN, SUMMARY = 0, 1, 2, 3
#: A CUDA OOM while the weights were loading: they do not fit the layout, and no memory flag changes that
#: (--mem-fraction-static and --gpu-memory-utilization size what comes after the weights). A switch that
#: knows its fit says it with figures (ops/switch/failure_text.py).
WEIGHTS_OOM_HINT = ("the GPU ran out of memory while the weights were loading: they do not fit this layout, so "
                    "no memory flag helps; spread them over more GPUs (TP, PP or EP) or use a smaller or "
                    "quantized checkpoint")


@dataclass(frozen=True, slots=True)
class Entry:
    """One class: `title` names it in plain words, `hint` says what to do, `tier` how root it is, and
    `by_engine` says it in one engine's own flags."""

    title: str
    hint: str
    tier: int
    by_engine: dict[Engine, str] = field(default_factory=dict)


CATALOGUE: dict[C, Entry] = {
    C.CUDA_OOM: Entry(
        "CUDA out of memory", "lower --mem-fraction-static / --gpu-memory-utilization, the batch size or "
        "max length, or spread the model over more GPUs", ROOT, {
            Engine.SGLANG: "lower --mem-fraction-static, --max-running-requests or --chunked-prefill-size, "
            "or spread the model over more GPUs",
            Engine.VLLM: "lower --gpu-memory-utilization, --max-num-seqs or --max-model-len, or spread the "
            "model over more GPUs"}),
    C.KV_CACHE_TOO_SMALL: Entry(
        "KV cache too small", "the weights leave too little GPU memory for the KV cache: raise "
        "--mem-fraction-static / --gpu-memory-utilization, lower --max-model-len, or use more GPUs", ROOT, {
            Engine.SGLANG: "the weights leave too little GPU memory for the KV cache: raise "
            "--mem-fraction-static, lower --context-length, or use more GPUs",
            Engine.VLLM: "the weights leave too little GPU memory for the KV cache: raise "
            "--gpu-memory-utilization, lower --max-model-len, or use more GPUs"}),
    C.MEMORY_IN_USE: Entry(
        "GPU memory already in use", "another process holds GPU memory (often an orphaned VLLM::EngineCore): "
        "stop it (nvidia-smi shows its pid) or lower --gpu-memory-utilization", ROOT, {
            Engine.SGLANG: "another process holds GPU memory: stop it (nvidia-smi shows its pid) or lower "
            "--mem-fraction-static"}),
    C.ENGINE_INIT: Entry(
        "engine start-up failed", "the engine gave up starting; the cause is earlier in the log", SUMMARY),
    C.CUDA_GRAPH: Entry(
        "CUDA graph capture failed", "lower --cuda-graph-max-bs or --mem-fraction-static, or start with "
        "--disable-cuda-graph / --enforce-eager to confirm", COLLATERAL, {
            Engine.SGLANG: "lower --cuda-graph-max-bs or --mem-fraction-static, or start with "
            "--disable-cuda-graph to confirm",
            Engine.VLLM: "lower --gpu-memory-utilization or --max-num-seqs, or start with --enforce-eager "
            "to confirm"}),
    C.NCCL: Entry(
        "NCCL error", "a collective between GPUs failed: check NCCL_DEBUG=INFO output, P2P/IB settings and "
        "that every rank is alive", COLLATERAL),
    C.NCCL_TIMEOUT: Entry(
        "NCCL collective timed out", "one rank stopped taking part (crashed, hung or much slower): look for "
        "the first rank that failed; raise the timeout only if the ranks are merely slow", COLLATERAL),
    C.PORT_IN_USE: Entry(
        "port already in use", "another server holds the port: stop it or choose another --port", ROOT),
    C.ILLEGAL_MEMORY_ACCESS: Entry(
        "CUDA illegal memory access", "a kernel read or wrote outside its memory (a bug, or an OOM in "
        "disguise): rerun with CUDA_LAUNCH_BLOCKING=1 and try another attention backend", ROOT),
    C.WEIGHT_LOAD_ERROR: Entry(
        "weights could not be loaded", "the checkpoint is missing, corrupt or does not match the model "
        "config or quantization: re-download it and check --model and --quantization", ROOT, {
            Engine.SGLANG: "the checkpoint is missing, corrupt or does not match the model config or "
            "quantization: re-download it and check --model-path and --quantization"}),
    C.UNSUPPORTED_ARCHITECTURE: Entry(
        "model architecture not supported", "this engine version does not know the model: upgrade the "
        "engine, or pass --trust-remote-code if the model ships its own code", ROOT),
    C.HF_ACCESS: Entry(
        "Hugging Face access refused", "the repo id is wrong, or the model is gated: accept its licence and "
        "set HF_TOKEN for the unit, or point --model at a local copy", ROOT, {
            Engine.SGLANG: "the repo id is wrong, or the model is gated: accept its licence and set HF_TOKEN "
            "for the unit, or point --model-path at a local copy"}),
    C.NO_KERNEL_IMAGE: Entry(
        "no kernel image", "this build has no kernels for this GPU: use a build for it", ROOT),
    C.QUANTIZATION_UNSUPPORTED: Entry(
        "quantization not supported on this GPU", "this quantization method needs a newer GPU: choose "
        "another quantized checkpoint or another --quantization", ROOT),
    C.SHM_EXHAUSTED: Entry(
        "shared memory (/dev/shm) exhausted", "give the process more /dev/shm (docker: --shm-size or "
        "--ipc=host) or disable custom all-reduce", ROOT),
    C.SEGFAULT: Entry(
        "segmentation fault", "native code crashed: check driver, CUDA and library versions match; try "
        "--enforce-eager or another attention backend", COLLATERAL, {
            Engine.SGLANG: "native code crashed: check driver, CUDA and library versions match; try "
            "--disable-cuda-graph or another --attention-backend"}),
    C.HOST_OOM: Entry(
        "host RAM exhausted (kernel OOM killer)", "the host ran out of RAM, not GPU memory: lower CPU-side "
        "memory (swap space, CPU offload, loader workers) or add RAM", ROOT),
    C.COMPILE_ERROR: Entry(
        "kernel compilation failed", "Triton/inductor could not compile a kernel (often too little shared "
        "memory on this GPU): try --enforce-eager or another backend, or a version for this GPU", ROOT, {
            Engine.SGLANG: "Triton/inductor could not compile a kernel (often too little shared memory on "
            "this GPU): try another --attention-backend, drop --enable-torch-compile, or a version for this GPU"}),
    C.CUDA_DRIVER_TOO_OLD: Entry(
        "NVIDIA driver too old for this CUDA", "upgrade the NVIDIA driver, or use an engine build for an "
        "older CUDA", ROOT),
    C.MAX_MODEL_LEN: Entry(
        "max model length too large", "--max-model-len / --context-length exceeds what the model supports: "
        "lower it (or override deliberately, e.g. VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)", ROOT, {
            Engine.SGLANG: "--context-length exceeds what the model supports: lower it (or override "
            "deliberately, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)",
            Engine.VLLM: "--max-model-len exceeds what the model supports: lower it (or override "
            "deliberately, VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"}),
    C.DISK_FULL: Entry(
        "disk full", "no space left on the device: free space in the model cache or temp directory", ROOT),
    C.GPU_XID: Entry(
        "GPU hardware or driver error (Xid/ECC)", "the GPU reported a fault: check nvidia-smi -q and the "
        "kernel log; reset or drain the GPU before reusing it", ROOT),
    C.NVSHMEM_INIT: Entry(
        "NVSHMEM (DeepEP) failed to initialise", "the EP ranks could not set up NVSHMEM: check that every "
        "node's IB/RoCE NICs are visible to the engine (container devices), nvidia-peermem or dmabuf is "
        "loaded for IBGDA, the NVSHMEM_* settings match on all nodes and each node reaches the others' "
        "bootstrap port", ROOT),
    C.DEEPEP_TIMEOUT: Entry(
        "DeepEP dispatch/combine timed out", "an expert-parallel rank stopped exchanging tokens (crashed, "
        "hung, or its node's RDMA link failed): look for the first rank or node that failed and check "
        "IB/RoCE between the nodes", COLLATERAL),
    C.GLOO: Entry(
        "Gloo could not reach another rank", "the ranks' CPU process group could not connect over TCP: set "
        "GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface the nodes reach each other on, and open "
        "the ports between the nodes", COLLATERAL),
    C.ENGINE_WATCHDOG: Entry(
        "the engine's watchdog killed a hung forward", "a forward (or a collective inside it) hung until the "
        "engine's own watchdog ended the engine: look for the rank or node that stopped first (NCCL or "
        "DeepEP timeouts, a dead node); raise the watchdog only if the batches are merely slow", COLLATERAL, {
            Engine.SGLANG: "a forward (or a collective inside it) hung until SGLang's watchdog ended the "
            "engine: look for the rank or node that stopped first (NCCL or DeepEP timeouts, a dead node); "
            "raise --watchdog-timeout only if the batches are merely slow",
            Engine.VLLM: "a worker did not answer the engine in time: look for the worker or node that "
            "stopped first (NCCL timeouts, a dead node); raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS only if "
            "the steps are merely slow"}),
    C.KV_TRANSFER: Entry(
        "KV transfer between prefill and decode failed", "the disaggregated servers cannot move KV cache: "
        "check each reaches the other's bootstrap/transfer port and RDMA devices (Mooncake: its metadata "
        "server and IB device; NIXL: VLLM_NIXL_SIDE_CHANNEL_HOST and UCX), and that both run the same "
        "model and layout", ROOT, {
            Engine.SGLANG: "the disaggregated servers cannot move KV cache: check each reaches the other's "
            "bootstrap port and RDMA devices (--disaggregation-ib-device, Mooncake's metadata server), and "
            "that both run the same model and layout",
            Engine.VLLM: "the disaggregated servers cannot move KV cache: check each reaches the other's side "
            "channel (VLLM_NIXL_SIDE_CHANNEL_HOST/PORT) and RDMA devices (UCX, Mooncake), and that both run "
            "the same model and layout"}),
    C.ENGINE_DIED: Entry(
        "an engine process died", "a process of the engine ended without an error of its own: killed (the "
        "host's OOM killer, kill -9) or crashed in native code; `journalctl -k` shows the OOM killer; restart "
        "the unit once the cause is gone", ROOT),
    C.ENGINE_ERROR: Entry(
        "the engine died of an error", "the exception or signal above ended the process; its message is "
        "the best lead", OPEN),
    C.UNIT_FAILED: Entry(
        "the unit failed", "systemd saw the process end; the cause is the engine's last lines before it",
        SUMMARY),
    C.TRACEBACK: Entry(
        "an exception", "an exception was logged; it is the cause only if the process then died", OPEN),
}


def hint_for(cls: C, engine: Engine | None = None) -> str:
    """What to do about a class, in one line, in the engine's own flags when it is known."""
    entry = CATALOGUE[cls]
    return entry.by_engine.get(engine, entry.hint) if engine is not None else entry.hint


def in_engine_terms(finding: Finding, engine: Engine | None) -> Finding:
    """The finding with the catalogue's hint said in the engine's own flags (a hint of its own is kept)."""
    if engine is None or finding.hint != CATALOGUE[finding.cls].hint:
        return finding
    hint = hint_for(finding.cls, engine)
    return finding if hint == finding.hint else replace(finding, hint=hint)


def tier_of(cls: C) -> int:
    """How root a class is: lower is nearer the root cause."""
    return CATALOGUE[cls].tier
