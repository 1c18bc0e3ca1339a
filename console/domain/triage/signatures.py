"""The failure signatures of the GPU-memory, NCCL, port and weight classes (shared/facts/engines.md).

Each signature has needles (plain substrings, checked before any regex so an ordinary line costs
a few substring scans) and a reader that turns a matching message into a plain-words summary.
The table that orders every signature lives in signature_table.py; the readers of the set-up and
environment classes in signatures_env.py, those of crashes, the host and systemd in
signatures_host.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from console.domain.safe_text import printable
from console.domain.triage.oom import oom_summary, parse_oom
from console.domain.values import FindingClass, OomFigures

_WATCHDOG = re.compile(r"OpType=(?P<op>\w+).{0,200}?Timeout\(ms\)=(?P<timeout>\d+)\)(?: ran for (?P<ran>\d+))?")
#: SGLang's and other servers' own words for a taken port: `metrics_port at 40290 is not available in
#: 30 seconds`, `port=30000 is used by a process already`, `Port 8000 is already in use`.
_NAMED_PORT = re.compile(
    r"(?P<name>\b\w{0,30}port)(?: at |=| )(?P<port>\d{1,5})\)? (?:is not available|is used by a process|is already in use)",
    re.IGNORECASE,
)
#: torch.distributed's `failed to bind to [::]:29500 (errno: 98 - Address already in use)`.
_BIND = re.compile(r"bind to (?P<addr>\[?[\w.:]{0,60}?\]?:(?P<port>\d{1,5}))\b")
#: torch.distributed's store: `port: 42173, useIpv6: false, code: -98, name: EADDRINUSE`.
_DIST_PORT = re.compile(r"port: (?P<port>\d{1,5}), useIpv6: \w+, code: -98")
_PORT = re.compile(r"\('(?P<host>[^']{0,100})', (?P<port>\d{1,5})\)|addr='[a-z]+://(?P<addr>[^']{0,100})'")
_FREE_ON_DEVICE = re.compile(
    r"\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less than desired GPU memory "
    r"utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)"
)
_MAX_LEN = re.compile(r"max seq len \((?P<len>\d+)\)")
_KV_STORED = re.compile(r"stored in KV cache \((?P<tokens>\d+)\)")
_KV_NEEDED = re.compile(r"\((?P<need>[\d.]+ \w?i?B) KV cache is needed")
_KV_AVAILABLE = re.compile(r"available KV cache memory \((?P<have>[\d.]+ \w?i?B)\)")
_KV_FITS = re.compile(r"estimated maximum model length is (?P<fits>\d+)")
_MEM_FRACTION = re.compile(r"--mem-fraction-static[= ](?P<value>\d*\.?\d+)")
_MEM_FRACTION_MIN = re.compile(r"(?:minimum|at least|>=)\D{0,60}?(?P<value>\d*\.\d+)")
_FAILED_PROCS = re.compile(r"Failed core proc\(s\): (?P<procs>\{.{0,200}?\})")
_SAFETENSORS_PATH = re.compile(r"[^\s'\"]{0,300}\.safetensors")
#: NCCL's result codes (`ncclUnhandledCudaError`, `ncclInvalidUsage`), not its other names (`ncclUniqueId`).
#: NCCL's words for a connection to another rank that broke (not a bind or a plugin it may do without).
_PEER_LOST = ("Connection closed by remote peer", "Broken pipe", "Connection reset by peer",
              "Failed to execute operation")
_NCCL_CODE = re.compile(r"\bnccl(?:[A-Z]\w{0,30}Error|Invalid[A-Z]\w{0,20}|InProgress)\b")

#: A parameter's name as a KeyError quotes it: `'layers.0.mlp.down_proj.weight.absmax'`.
PARAM_NAME = r"(?:[\w-]{1,80}\.){1,12}[\w-]{0,80}(?:weight|bias|scale|absmax|qzeros|scales|g_idx|zeros)[\w.-]{0,40}"
_PARAM_KEY = re.compile(r"KeyError: '(?P<key>" + PARAM_NAME + ")'")
#: vLLM V0's `# GPU blocks: 0, # CPU blocks: 256` (`# cuda blocks: 0` later): it raises at once after.
ZERO_BLOCKS = ("# GPU blocks: 0,", "# cuda blocks: 0,")
_PROFILED = re.compile(r"max_total_tokens=(?P<want>\d+) is larger than the profiled value (?P<got>-\d+)")
_ARCH = re.compile(r"\bsm_?(?P<sm>\d{2,3}a?)\b")


class Reading(NamedTuple):
    """What a reader makes of a message: its summary and figures, and a class other than the
    signature's own when the message is one class wearing another's words (an OOM reported as a
    failed CUDA-graph capture is a CUDA OOM, in the context of the capture)."""

    summary: str
    fatal: bool = True
    oom: OomFigures | None = None
    cls: FindingClass | None = None
    context: FindingClass | None = None
    hint: str | None = None
    certain: bool = False  # fatal at any log level: the engine's very next step raises on it


#: A reader: (message, rank) -> its reading, or None when the needle matched but the message is not this class.
Reader = Callable[[str, str | None], Reading | None]


def around(text: str, needle: str, before: int = 220, after: int = 200) -> str:
    """The part of `text` around the first `needle`: regexes that start with an unanchored class
    (a unit name, a path) run on this window, so a 1 MB line costs no more than a short one."""
    at = text.find(needle)
    if at < 0:
        return ""
    return text[max(at - before, 0) : at + len(needle) + after]


def clip(text: str, limit: int = 160) -> str:
    """The text on one printable line, shortened to `limit` characters with an ellipsis.

    Whitespace (line breaks included) collapses to single spaces; every other control, C1 or bidi
    character becomes visible escape text (`printable`), so no escape sequence reaches a terminal.
    """
    text = printable(" ".join(text[: limit * 2].split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cuda_graph(text: str, rank: str | None) -> Reading:
    """A failed CUDA-graph capture; an OOM or illegal access it quotes is the root cause."""
    figures = parse_oom(text)
    if figures is not None:
        return Reading(oom_summary(figures, rank), True, figures, FindingClass.CUDA_OOM, FindingClass.CUDA_GRAPH)
    if "illegal memory access" in text:
        return Reading(illegal_access(text, rank).summary, cls=FindingClass.ILLEGAL_MEMORY_ACCESS,
                       context=FindingClass.CUDA_GRAPH)
    if ("by --disable-cuda-graph" in text or "add --disable-piecewise-cuda-graph" in text) and (
        "Capture" not in text and "Piecewise CUDA Graph failed" not in text
    ):
        return Reading("CUDA graph capture failed: SGLang printed its capture-failure advice (the reason "
                       "comes just before it)")
    for marker in ("Capture cuda graph failed", "Capture CUDA graph failed", "CUDA graph capture failed",
                   "Piecewise CUDA Graph failed with error", "Piecewise CUDA Graph failed"):
        if marker in text:
            reason = text.split(marker, 1)[1].lstrip(": .")
            return Reading(f"CUDA graph capture failed: {clip(reason, 120) or 'no reason given'}")
    return Reading(f"CUDA graph capture failed: {clip(text, 140)}")


def cuda_oom(text: str, rank: str | None) -> Reading | None:
    """A CUDA OOM with its figures (none in `CUDA error: out of memory`, nor from cuBLAS)."""
    figures = parse_oom(text)
    if figures is None and "CUBLAS_STATUS_ALLOC_FAILED" in text:
        figures = OomFigures(None, None, None, None, None)
        return Reading(f"CUDA OOM{f' ({rank})' if rank else ''}: cuBLAS could not allocate its workspace", True,
                       figures)
    if figures is None:
        return None
    # NCCL logs its failed allocation as a WARN, then fails the collective: the OOM is the cause.
    return Reading(oom_summary(figures, rank), True, figures, certain="Cuda failure 'out of memory'" in text)


def kv_cache(text: str, rank: str | None) -> Reading | None:
    """The KV cache does not fit beside the weights (SGLang's and vLLM's words for it)."""
    if "profiled value" in text:
        m = _PROFILED.search(text)
        if m is None:
            return None  # a positive profiled value: SGLang just uses it
        return Reading(f"KV cache does not fit: the profiled KV budget is {m['got']} tokens "
                       f"(max_total_tokens={m['want']}); the weights leave no memory for it")
    if "KV cache is needed" in text or "stored in KV cache" in text or "To serve at least one" in text:
        max_len, need, have, fits = (
            _MAX_LEN.search(text), _KV_NEEDED.search(text), _KV_AVAILABLE.search(text), _KV_FITS.search(text)
        )
        stored = _KV_STORED.search(text)
        summary = "KV cache too small for the max model length"
        summary += f" {max_len['len']}" if max_len else ""
        if need and have:
            summary += f": needs {need['need']}, {have['have']} available"
        summary += f"; about {fits['fits']} tokens would fit" if fits else ""
        summary += f"; the KV cache holds {stored['tokens']} tokens" if stored else ""
        return Reading(summary)
    if any(marker in text for marker in ZERO_BLOCKS):
        return Reading("KV cache does not fit: vLLM profiled 0 GPU blocks for it (the weights take the "
                       "memory), and refuses to start", certain=True)
    if "No available memory for the cache blocks" in text:
        return Reading("KV cache does not fit: no GPU memory left for cache blocks (vLLM)")
    summary = "KV cache does not fit: the weights leave no GPU memory for it"
    current, minimum = _MEM_FRACTION.search(text), _MEM_FRACTION_MIN.search(text)
    summary += f" at --mem-fraction-static={current['value']}" if current else " under --mem-fraction-static"
    summary += f" (minimum workable {minimum['value']})" if minimum and current else ""
    return Reading(summary)


def memory_in_use(text: str, rank: str | None) -> Reading:
    """Less GPU memory free at start-up than the engine was told to take."""
    if "memory capacity is unbalanced" in text:
        return Reading("GPU memory unbalanced across GPUs at start-up: some GPUs are used by other processes")
    if "Error in memory profiling" in text:
        return Reading(f"GPU memory changed while the engine profiled it (another process?): {clip(text, 100)}")
    m = _FREE_ON_DEVICE.search(text)
    if m is None:
        return Reading("GPU memory already in use at start-up (an orphaned VLLM::EngineCore?)")
    return Reading(
        f"GPU memory already in use at start-up: {m['free']} of {m['total']} GiB free, {m['want']} GiB"
        f" wanted (utilization {m['util']}); an orphaned VLLM::EngineCore?"
    )


def engine_init(text: str, rank: str | None) -> Reading:
    """The engine's own summary that start-up failed: the root cause is earlier in the log."""
    if "warmup error" in text:
        reason = text.split("warmup error", 1)[1].lstrip(": ")
        return Reading(f"SGLang warm-up failed: {clip(reason, 120) or 'no reason given'}")
    if "sigquit from a child" in text:
        return Reading("SGLang: a child process failed (sigquit); the root cause is earlier in the log")
    procs = _FAILED_PROCS.search(text)
    detail = f" (failed: {clip(procs['procs'], 120)})" if procs and procs["procs"] != "{}" else ""
    return Reading(f"Engine initialisation failed{detail}; the root cause is earlier in the log")


def illegal_access(text: str, rank: str | None) -> Reading:
    """A CUDA illegal memory access, however it was reported (NCCL's watchdog, a worker)."""
    via = " (reported through the NCCL watchdog)" if "watchdog" in text.lower() else ""
    return Reading(f"CUDA illegal memory access{via} (sometimes an OOM in disguise)")


def parameter_key(text: str, rank: str | None) -> Reading | None:
    """A KeyError that names a parameter: the loader looked up a checkpoint tensor the model does not
    have (`params_dict[name]`). None for a KeyError of something else (the open world names it)."""
    key = _PARAM_KEY.search(text)
    if key is None:
        return None
    return Reading(f"Weights could not be loaded: KeyError: '{clip(key['key'], 100)}' (a checkpoint "
                   "tensor the model has no parameter for: names or quantization differ)")


def weight_load(text: str, rank: str | None) -> Reading | None:
    """A missing, corrupt or mismatched checkpoint."""
    if "FileNotFoundError" in text or "No such file or directory" in text:
        path = _SAFETENSORS_PATH.search(around(text, ".safetensors", 300, 12))
        return Reading(f"Checkpoint file missing: {clip(path.group(0), 120)}") if path else None
    if "SafetensorError" in text or "deserializing header" in text:
        return Reading(f"Checkpoint file unreadable: {clip(text, 120)}")
    if "is not divisible by weight quantization block" in text:
        return Reading(f"Weight shard does not fit the quantization block: {clip(text, 120)}")
    if "Cannot find any model weights" in text:
        return Reading(f"No checkpoint weights found: {clip(text, 120)}")
    if "size mismatch" in text or "Attempted to load weight" in text:
        return Reading(f"Weight shape mismatch: {clip(text, 140)}")
    return Reading(f"Weights could not be loaded: {clip(text, 140)}")


def nccl(text: str, rank: str | None) -> Reading:
    """An NCCL error: its code, or the words after `NCCL error`. An `NCCL WARN` line alone is a note
    (decisive.py makes it the cause of a death that names none)."""
    if "NCCL WARN" in text and "NCCL error" not in text and "NCCL Error" not in text:
        warned = clip(text.split("NCCL WARN", 1)[1].strip(), 120)
        if any(words in text for words in _PEER_LOST):  # a rank on another node is gone: the collective fails
            return Reading(f"NCCL lost a peer: {warned}", certain=True)
        return Reading(f"NCCL warning: {warned}", fatal=False)
    code = _NCCL_CODE.search(text)
    if code is not None:
        return Reading(f"NCCL error: {code.group(0)}")
    for words in ("unhandled cuda error", "unhandled system error", "internal error", "remote process exited"):
        if words in text:
            return Reading(f"NCCL error: {words}")
    if "setting up NCCL communicator" in text:
        return Reading(f"NCCL communicator set-up failed: {clip(text.split('got error', 1)[-1].lstrip(': '), 100)}")
    return Reading(f"NCCL error: {clip(text, 120)}")


def nccl_timeout(text: str, rank: str | None) -> Reading:
    """c10d's watchdog gave up on a collective that never completed."""
    if "watchdog got stuck" in text:
        return Reading(f"NCCL watchdog stuck: collectives made no progress: {clip(text, 100)}")
    m = _WATCHDOG.search(text)
    if m:
        ran = f" ran {m['ran']} ms" if m["ran"] else ""
        return Reading(f"NCCL collective timed out: {m['op']}{ran} (timeout {m['timeout']} ms)")
    return Reading("NCCL collective timed out (watchdog)")


def port_in_use(text: str, rank: str | None) -> Reading | None:
    """The server could not bind its port (or found it taken before binding)."""
    dist = _DIST_PORT.search(text[:2000])
    if dist is not None or "EADDRINUSE" in text:
        port = f"Port {dist['port']}" if dist else "A port"
        return Reading(f"{port} is already in use: the torch.distributed store could not listen on it")
    if "ddress already in use" not in text and "[Errno 98]" not in text:
        named = _NAMED_PORT.search(text[:2000])
        if named is None:
            return None  # "is not available in" / "is already in use" said of something other than a port
        what = "" if named["name"].lower() == "port" else f" ({clip(named['name'], 40)})"
        return Reading(f"Port {named['port']}{what} is already in use by another process")
    m = _PORT.search(text)
    if m and m["port"]:
        return Reading(f"Port {m['port']} on {clip(m['host'], 100) or '*'} is already in use")
    if m and m["addr"]:
        return Reading(f"Address {clip(m['addr'], 100)} is already in use")
    bind = _BIND.search(around(text, "bind to", 0, 80))
    if bind:
        return Reading(f"Port {bind['port']} ({clip(bind['addr'], 80)}) is already in use")
    return Reading(f"Address already in use: {clip(text, 120)}")


def gpu_arch(text: str) -> str | None:
    """The GPU architecture a message names (`sm_120`, `sm90`), if any."""
    m = _ARCH.search(text)
    return f"sm_{m['sm']}" if m else None


