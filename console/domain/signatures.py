"""The failure signatures of SGLang, vLLM, PyTorch, NCCL and systemd (shared/facts/engines.md).

Each signature has needles (plain substrings, checked before any regex so an ordinary line costs
a few substring scans) and a reader that turns a matching message into a plain-words summary.
Signatures are tried in order: the first one whose reader accepts the message wins, so the more
specific ones come first (a CUDA-graph failure may quote an OOM; an OOM is not a port clash).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from console.domain.models import FindingClass, OomFigures
from console.domain.oom import OOM_MARKERS, oom_summary, parse_oom
from console.domain.text import printable

#: The harmless NCCL warning `Call to bind failed: Address already in use`: never a finding.
HARMLESS = ("Call to bind failed",)

_UNIT = r"(?P<unit>[\w@.:\\-]{1,200}\.(?:service|scope|socket))"
_MAIN_EXITED = re.compile(_UNIT + r": Main process exited, code=(?P<code>\w+), status=(?P<status>[^\s,]+)")
_FAILED_RESULT = re.compile(r"(?:" + _UNIT + r": )?Failed with result '(?P<result>[\w-]{1,40})'")
_UNIT_PREFIX = re.compile(_UNIT + ": ")
_KERNEL_OOM = re.compile(r"Out of memory: Killed process (?P<pid>\d+) \((?P<comm>[^)]{0,64})\)")
_WATCHDOG = re.compile(r"OpType=(?P<op>\w+).{0,200}?Timeout\(ms\)=(?P<timeout>\d+)\)(?: ran for (?P<ran>\d+))?")
_PORT = re.compile(r"\('(?P<host>[^']{0,100})', (?P<port>\d{1,5})\)|addr='[a-z]+://(?P<addr>[^']{0,100})'")
_FREE_ON_DEVICE = re.compile(
    r"\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less than desired GPU memory "
    r"utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)"
)
_MAX_LEN = re.compile(r"max seq len \((?P<len>\d+)\)")
_KV_NEEDED = re.compile(r"\((?P<need>[\d.]+ \w?i?B) KV cache is needed")
_KV_AVAILABLE = re.compile(r"available KV cache memory \((?P<have>[\d.]+ \w?i?B)\)")
_KV_FITS = re.compile(r"estimated maximum model length is (?P<fits>\d+)")
_MEM_FRACTION = re.compile(r"--mem-fraction-static[= ](?P<value>\d*\.?\d+)")
_MEM_FRACTION_MIN = re.compile(r"(?:minimum|at least|>=)\D{0,60}?(?P<value>\d*\.\d+)")
_FAILED_PROCS = re.compile(r"Failed core proc\(s\): (?P<procs>\{.{0,200}?\})")
_SAFETENSORS_PATH = re.compile(r"[^\s'\"]{0,300}\.safetensors")
_NCCL_CODE = re.compile(r"\bnccl[A-Z]\w{0,40}")

#: What a reader returns: (summary, fatal, oom figures).
Reading = tuple[str, bool, OomFigures | None]


@dataclass(frozen=True, slots=True)
class Signature:
    """One failure class's needles and the reader that confirms a match and summarises it."""

    cls: FindingClass
    needles: tuple[str, ...]
    read: Callable[[str, str | None], Reading | None]


def _around(text: str, needle: str, before: int = 220, after: int = 200) -> str:
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


def _cuda_graph(text: str, rank: str | None) -> Reading:
    figures = parse_oom(text)
    if figures is not None:
        return f"CUDA graph capture failed: {oom_summary(figures, rank)}", True, figures
    reason = text.split("Capture cuda graph failed", 1)[1].lstrip(": ")
    return f"CUDA graph capture failed: {clip(reason, 120) or 'no reason given'}", True, None


def _cuda_oom(text: str, rank: str | None) -> Reading | None:
    figures = parse_oom(text)
    return (oom_summary(figures, rank), True, figures) if figures is not None else None


def _kv_cache(text: str, rank: str | None) -> Reading:
    if "KV cache is needed" in text or "stored in KV cache" in text:
        max_len, need, have, fits = (
            _MAX_LEN.search(text), _KV_NEEDED.search(text), _KV_AVAILABLE.search(text), _KV_FITS.search(text)
        )
        summary = "KV cache too small for the max model length"
        summary += f" {max_len['len']}" if max_len else ""
        if need and have:
            summary += f": needs {need['need']}, {have['have']} available"
        summary += f"; about {fits['fits']} tokens would fit" if fits else ""
        return summary, True, None
    if "No available memory for the cache blocks" in text:
        return "KV cache does not fit: no GPU memory left for cache blocks (vLLM)", True, None
    summary = "KV cache does not fit: the weights leave no GPU memory for it"
    current, minimum = _MEM_FRACTION.search(text), _MEM_FRACTION_MIN.search(text)
    summary += f" at --mem-fraction-static={current['value']}" if current else " under --mem-fraction-static"
    summary += f" (minimum workable {minimum['value']})" if minimum and current else ""
    return summary, True, None


def _memory_in_use(text: str, rank: str | None) -> Reading:
    m = _FREE_ON_DEVICE.search(text)
    if m is None:
        return "GPU memory already in use at start-up (an orphaned VLLM::EngineCore?)", True, None
    return (
        f"GPU memory already in use at start-up: {m['free']} of {m['total']} GiB free, {m['want']} GiB"
        f" wanted (utilization {m['util']}); an orphaned VLLM::EngineCore?",
        True,
        None,
    )


def _engine_init(text: str, rank: str | None) -> Reading:
    if "warmup error" in text:
        reason = text.split("warmup error", 1)[1].lstrip(": ")
        return f"SGLang warm-up failed: {clip(reason, 120) or 'no reason given'}", True, None
    procs = _FAILED_PROCS.search(text)
    detail = f" (failed: {clip(procs['procs'], 120)})" if procs and procs["procs"] != "{}" else ""
    return f"Engine initialisation failed{detail}; the root cause is earlier in the log", True, None


def _cuda_illegal(text: str, rank: str | None) -> Reading:
    return "CUDA illegal memory access (sometimes an OOM in disguise)", True, None


def _weight_load(text: str, rank: str | None) -> Reading | None:
    if "FileNotFoundError" in text:
        path = _SAFETENSORS_PATH.search(_around(text, ".safetensors", 300, 12))
        return (f"Checkpoint file missing: {clip(path.group(0), 120)}", True, None) if path else None
    if "SafetensorError" in text or "deserializing header" in text:
        return f"Checkpoint file unreadable: {clip(text, 120)}", True, None
    if "is not divisible by weight quantization block" in text:
        return f"Weight shard does not fit the quantization block: {clip(text, 120)}", True, None
    if "Cannot find any model weights" in text:
        return f"No checkpoint weights found: {clip(text, 120)}", True, None
    return f"Weight shape mismatch: {clip(text, 140)}", True, None


def _nccl(text: str, rank: str | None) -> Reading:
    if "Watchdog caught collective operation timeout" in text:
        m = _WATCHDOG.search(text)
        if m:
            ran = f" ran {m['ran']} ms" if m["ran"] else ""
            return f"NCCL collective timed out: {m['op']}{ran} (timeout {m['timeout']} ms)", True, None
        return "NCCL collective timed out (watchdog)", True, None
    code = _NCCL_CODE.search(text)
    return f"NCCL error: {code.group(0) if code else clip(text, 120)}", True, None


def _port_in_use(text: str, rank: str | None) -> Reading:
    m = _PORT.search(text)
    if m and m["port"]:
        return f"Port {m['port']} on {clip(m['host'], 100) or '*'} is already in use", True, None
    if m and m["addr"]:
        return f"Address {clip(m['addr'], 100)} is already in use", True, None
    return f"Address already in use: {clip(text, 120)}", True, None


def _unit_failed(text: str, rank: str | None) -> Reading | None:
    m = _MAIN_EXITED.search(_around(text, ": Main process exited"))
    if m:
        code, status = m["code"], clip(m["status"], 40)
        if code == "exited" and status.startswith("0"):
            return None
        if code == "killed":
            stopped = status.split("/")[-1] in ("TERM", "INT")
            return f"{m['unit']}: main process killed by signal {status}", not stopped, None
        if code == "dumped":
            return f"{m['unit']}: main process dumped core (signal {status})", True, None
        return f"{m['unit']}: main process exited with status {status}", True, None
    m = _KERNEL_OOM.search(text)
    if m:
        return f"Kernel OOM killer killed process {m['pid']} ({clip(m['comm'], 64)}): host RAM, not GPU", True, None
    unit_m = _UNIT_PREFIX.match(text)
    unit = unit_m["unit"] if unit_m else "unit"
    if "Start request repeated too quickly" in text:
        return f"{unit}: restarted too often, systemd gave up (start-limit-hit)", True, None
    if "Failed at step" in text or "Failed to execute" in text:
        return f"{unit}: could not run the command: {clip(text[unit_m.end() if unit_m else 0 :], 120)}", True, None
    if "killed by the OOM killer" in text:
        return f"{unit}: a process was killed by the kernel's OOM killer (host RAM, not GPU)", True, None
    m = _FAILED_RESULT.search(_around(text, "Failed with result '"))
    if m:
        result = m["result"]
        if result == "success":
            return None
        why = {"oom-kill": " (kernel OOM killer, host RAM)", "start-limit-hit": " (restarted too often)"}
        return f"{m['unit'] or unit}: failed with result '{result}'{why.get(result, '')}", True, None
    return None


SIGNATURES: tuple[Signature, ...] = (
    Signature(FindingClass.CUDA_GRAPH, ("Capture cuda graph failed",), _cuda_graph),
    Signature(FindingClass.CUDA_OOM, OOM_MARKERS, _cuda_oom),
    Signature(
        FindingClass.KV_CACHE_TOO_SMALL,
        (
            "Not enough memory. Please try to increase --mem-fraction-static",
            "leave no GPU memory for the KV cache",
            "No available memory for the cache blocks",
            "KV cache is needed, which is larger than the available KV cache memory",
            "larger than the maximum number of tokens that can be stored in KV cache",
        ),
        _kv_cache,
    ),
    Signature(
        FindingClass.MEMORY_IN_USE, ("on startup is less than desired GPU memory utilization",), _memory_in_use
    ),
    Signature(
        FindingClass.WEIGHT_LOAD_ERROR,
        (
            "SafetensorError",
            "Error while deserializing header",
            "FileNotFoundError",
            "size mismatch for",
            "Attempted to load weight",
            "Cannot find any model weights",
            "is not divisible by weight quantization block",
        ),
        _weight_load,
    ),
    Signature(FindingClass.ILLEGAL_MEMORY_ACCESS, ("an illegal memory access was encountered",), _cuda_illegal),
    Signature(
        FindingClass.NCCL,
        (
            "Watchdog caught collective operation timeout",
            "NCCL error",
            "ncclUnhandledCudaError",
            "ncclSystemError",
            "ncclInternalError",
            "ncclRemoteError",
            "ncclInvalidUsage",
        ),
        _nccl,
    ),
    Signature(FindingClass.PORT_IN_USE, ("[Errno 98]", "ddress already in use"), _port_in_use),
    Signature(
        FindingClass.ENGINE_INIT,
        (
            "Engine core initialization failed",
            "Initialization failed. warmup error",
            "Initialization failed. Please see",
        ),
        _engine_init,
    ),
    Signature(
        FindingClass.UNIT_FAILED,
        (
            "Main process exited, code=",
            "Failed with result '",
            "Start request repeated too quickly",
            "Failed at step",
            "Failed to execute",
            "killed by the OOM killer",
            "Out of memory: Killed process",
        ),
        _unit_failed,
    ),
)

#: Every needle of every signature: a line containing none of them is no finding.
ALL_NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(n for sig in SIGNATURES for n in sig.needles))
#: Short substrings such that every needle contains one (a unit test checks it). Half as many scans
#: as the needles themselves: the cheap first test of every line.
GATES: tuple[str, ...] = (
    "memory", "rror", "nccl", "Watchdog", "in use", "Errno", "nitialization failed", "graph failed",
    "Main process", "Failed ", "Start request", "OOM killer", "stored in KV", "mismatch", "load weight",
    "model weights", "divisible",
)


def read_signature(text: str, rank: str | None) -> tuple[FindingClass, Reading] | None:
    """The first signature that matches a message, with its reading; None for an ordinary message."""
    for needle in HARMLESS:
        if needle in text:
            return None
    for sig in SIGNATURES:
        for needle in sig.needles:
            if needle in text:
                reading = sig.read(text, rank)
                if reading is not None:
                    return sig.cls, reading
                break
    return None
