"""The failure signatures of services over several hosts and of expert parallelism (issue 30, C11).

NVSHMEM (DeepEP's transport) failing to initialise, DeepEP's dispatch or combine timing out, Gloo (the
CPU process group) failing to reach another rank, the engines' own watchdogs (SGLang's scheduler
watchdog, vLLM's RPC to its workers) giving up on a hung forward, and the KV-transfer engines of a
disaggregated deployment (Mooncake, NIXL) failing. The words are the libraries' own, as real logs show
them (tests/corpus/multinode/).
"""

from __future__ import annotations

import re

from console.domain.triage.signatures import Reading, clip

#: NVSHMEM's error macros print `file.cpp:LINE: non-zero status: 7 what failed` or `NULL value what`.
_NVSHMEM_STATUS = re.compile(r"(?:non-zero status: -?\d+:? ?|NULL value )(?P<what>[^/\n]{0,160})")
#: NVSHMEM's words for an initialisation it gave up on (the status lines above say what failed).
_NVSHMEM_FATAL = (
    "initialization failed", "Unable to initialize any transports", "called before NVSHMEM initialization",
    "nvshmemi_init_thread", "detect topo failed", "setup connections failed", "transport map failed",
)
#: `Watchdog timeout (self.watchdog_timeout=300)`, since late 2025 `Scheduler watchdog timeout
#: (self.watchdog_timeout=300, self.soft=False)`; a soft one (`--soft-watchdog-timeout`) only dumps.
_SGLANG_WATCHDOG = re.compile(r"atchdog timeout \(self\.watchdog_timeout=(?P<s>[\d.]+)(?:, self\.soft=(?P<soft>\w+))?\)")
_VLLM_RPC = re.compile(r"RPC call to (?P<method>\w{1,60}) timed out")
#: A KV transfer's own words of failure, in SGLang's disaggregation, Mooncake and vLLM's connectors.
KV_TRANSFER_NEEDLES = (
    "KVTransferError", "Mooncake transfer failed", "Failed to transfer KV", "NIXL transfer failure",
    "NIXL agent engine ID mismatch", "Handshake failed for request", "NIXL_ERR_", "Transfer Return Error",
    "Failed to send kv chunk", "Failed to get kvcache", "Failed to connect to segment", "metadata not found",
    "Process failed for slice",  # Mooncake's RDMA worker (`transport retry counter exceeded`: the peer never acknowledged)
)


def nvshmem_init(text: str, rank: str | None) -> Reading | None:
    """NVSHMEM gave up initialising: what failed, in its own words. A transport it may do without
    (`init failed for transport: IBGDA`) or a warning is a note."""
    lowered = text[:2000].lower()
    if "nvshmem" not in lowered:
        return None
    status = _NVSHMEM_STATUS.search(text[:2000])
    fatal_words = next((w for w in _NVSHMEM_FATAL if w in text), None)
    if status is None and fatal_words is None:
        if "init failed for" in text or text.startswith("WARN"):
            return Reading(f"NVSHMEM warning: {clip(text, 140)}", fatal=False)
        return None
    what = (status["what"].strip() if status is not None else "") or fatal_words or "an NVSHMEM call failed"
    return Reading(f"NVSHMEM (DeepEP's transport) failed to initialise: {clip(what, 120)}", certain=True)


def deepep_timeout(text: str, rank: str | None) -> Reading | None:
    """DeepEP's dispatch or combine waited in vain for another EP rank's tokens."""
    at = text.find("DeepEP")
    if at < 0 or "timeout" not in text[at:at + 300].lower():
        return None
    return Reading(f"DeepEP timed out waiting for another expert-parallel rank: {clip(text[at:], 120)}",
                   certain=True)


def gloo(text: str, rank: str | None) -> Reading | None:
    """Gloo, the CPU process group across the nodes, could not reach or hear from another rank."""
    if "connectFullMesh failed" in text:
        return Reading("Gloo could not connect to every other rank (connectFullMesh failed): a node is "
                       "unreachable on the interface Gloo chose")
    if "gloo" not in text.lower():
        return None
    for words in ("Timed out waiting", "Connection reset by peer", "Connection refused", "Connection closed by peer",
                  "Socket Timeout", "timed out"):
        if words in text:
            return Reading(f"Gloo lost another rank: {clip(text, 140)}")
    return None


def engine_watchdog(text: str, rank: str | None) -> Reading | None:
    """The engine's own watchdog gave up on a forward that made no progress, and the engine died of it:
    SGLang's scheduler watchdog, vLLM's RPC to its workers."""
    m = _SGLANG_WATCHDOG.search(text)
    if m is not None and m["soft"] == "True":
        return Reading(f"SGLang's soft watchdog: a forward batch made no progress for {m['s']} s (dumped, not killed)",
                       fatal=False)
    if m is not None:
        return Reading(f"SGLang's watchdog fired: a forward batch made no progress for {m['s']} s, so the "
                       "engine killed itself", certain=True)
    m = _VLLM_RPC.search(text)
    if m is not None:
        return Reading(f"vLLM's workers did not answer {m['method']} in time (RPC timeout): a worker hung or died",
                       certain=True)
    return None


def kv_transfer(text: str, rank: str | None) -> Reading | None:
    """A disaggregated deployment's KV cache could not move between prefill and decode."""
    if "Aborted by AbortReq" in text:
        return Reading(f"KV transfer aborted with its request: {clip(text, 120)}", fatal=False)
    if "metadata not found" in text and "ooncake" not in text:
        return None
    return Reading(f"KV transfer between prefill and decode failed: {clip(text, 140)}")


def handshake(text: str, rank: str | None) -> Reading | None:
    """vLLM's KV connector could not handshake with the other side (`Handshake with ENGINE failed`)."""
    if "Handshake with " not in text or not text.rstrip().endswith("failed"):
        return None
    return Reading(f"KV transfer between prefill and decode failed: {clip(text, 140)}")
