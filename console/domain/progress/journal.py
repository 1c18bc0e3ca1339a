"""The engines' periodic journal lines that say a step ran: SGLang's batch lines, vLLM's stats line.

SGLang's scheduler (attn-TP rank 0 of each DP rank) logs `Prefill batch. #new-seq: N, #new-token: N,
#cached-token: N, token usage: x, #running-req: N, #queue-req: N,` for every prefill batch or chunk and
`Decode batch. #running-req: N, #token: N, token usage: x, cuda graph: B, gen throughput (token/s): X,
#queue-req: N,` every 40 decode steps; both are silent when idle or stalled (newer builds write `,`
after `batch`). vLLM's API server logs `Engine 000: Avg prompt throughput: X tokens/s, Avg generation
throughput: X tokens/s, Running: N reqs, Waiting: N reqs, ...` every 10 s, one 0.0 line after traffic
stops, then nothing: a throughput above 0 is progress, a zero line is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SGLANG = re.compile(r"\b(?P<kind>Prefill|Decode) batch[.,] (?P<fields>.*)")
_FIELD = re.compile(r"#(?P<name>[a-z-]+): (?P<value>\d+)")
_USAGE = re.compile(r"token usage: (?P<usage>[0-9.]+)")
_RANK = re.compile(r"\[[^\]]*?(?P<rank>(?:DP\d+ )?(?:PP\d+ )?TP\d+(?: EP\d+)?)\]")
_VLLM = re.compile(
    r"Avg prompt throughput: (?P<prompt>[0-9.]+) tokens/s, Avg generation throughput: (?P<gen>[0-9.]+) "
    r"tokens/s, (?:Max iteration time: .*?, )?Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"(?:Waiting|Pending): (?P<waiting>\d+) reqs"
)


@dataclass(frozen=True, slots=True)
class BatchLine:
    """What one progress line says."""

    kind: str
    """`prefill`, `decode` (SGLang) or `stats` (vLLM)."""
    moved: bool
    """The line itself is proof that a step ran (a batch line; a stats line with a throughput above 0)."""
    running: int | None = None
    waiting: int | None = None
    new_tokens: int | None = None
    """SGLang's `#new-token` of a prefill batch (a chunk's size in a chunked prefill)."""
    token_usage: float | None = None
    rank: str | None = None
    """The logging rank's prefix (`TP0`, `DP1 TP0`), when the line carries one."""


def parse_batch_line(message: str) -> BatchLine | None:
    """The progress one journal line reports, or None when it is no progress line."""
    match = _SGLANG.search(message)
    if match is not None:
        fields = {m["name"]: int(m["value"]) for m in _FIELD.finditer(match["fields"])}
        usage = _USAGE.search(match["fields"])
        rank = _RANK.search(message[: match.start()])
        return BatchLine(
            kind=match["kind"].lower(),
            moved=True,
            running=fields.get("running-req"),
            waiting=fields.get("queue-req"),
            new_tokens=fields.get("new-token"),
            token_usage=float(usage["usage"]) if usage else None,
            rank=rank["rank"] if rank else None,
        )
    match = _VLLM.search(message)
    if match is not None:
        return BatchLine(
            kind="stats",
            moved=float(match["prompt"]) > 0 or float(match["gen"]) > 0,
            running=int(match["running"]),
            waiting=int(match["waiting"]),
        )
    return None
