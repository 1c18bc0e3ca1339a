"""Token generation at a layout's speed, and the `sglang:` metrics it feeds.

Decode speed at concurrency 1 follows the story's measurements on 8x RTX PRO 6000 (PCIe) for Kimi K2.6:
TP8 26.3, PP8 36.9 and TP8 EP8 65.3 tok/s, with aggregate ceilings of about 808, 396 and 961 tok/s.
Other layouts are interpolated: fewer TP ranks mean fewer PCIe all-reduces per token (faster per
request), EP removes the expert all-reduce (moves a TP layout towards the EP figure), PP pays a hop
per stage. Per-request speed at concurrency c is r1 / (1 + (c - 1) r1 / A), which tends to the ceiling A.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from console.domain.layout import Layout
from console.sim.metrics import Metrics
from console.sim.stall import Stall

TP8_RATE, PP8_RATE, EP8_RATE = 26.3, 36.9, 65.3
TP8_CEILING, PP8_CEILING, EP8_CEILING = 808.0, 396.0, 961.0
PREFILL_TOKENS_PER_S = 6000.0
DECODE_LOG_INTERVAL = 40
MAX_LAG_S = 0.05

_WORDS = (
    "The", "cluster", "serves", "tokens", "from", "eight", "GPUs", ",", "and", "each", "layer", "moves",
    "its", "experts", "across", "the", "PCIe", "fabric", ".", "Latency", "depends", "on", "how", "the",
    "model", "is", "split", ":", "tensor", "parallel", "ranks", "all-reduce", "every", "step", ",",
    "while", "expert", "parallel", "ranks", "exchange", "only", "routed", "activations", ".",
)


def _tp_rate(tp: int) -> float:
    return TP8_RATE * (8 / max(tp, 1)) ** 0.35


def decode_rate_c1(layout: Layout) -> float:
    """Tokens per second one request gets when it runs alone."""
    tp, pp, ep = max(layout.tp, 1), max(layout.pp, 1), max(layout.ep, 1)
    rate = _tp_rate(tp)
    if ep > 1 and tp > 1:
        ep_rate = EP8_RATE * (8 / tp) ** 0.2
        rate += (ep_rate - rate) * math.log2(ep) / math.log2(tp)
    if pp > 1:
        pp_rate = PP8_RATE * (8 / pp) ** 0.1
        rate = pp_rate * (1 + 0.1 * math.log2(tp)) if tp > 1 else pp_rate
    return round(rate, 2)


def aggregate_ceiling(layout: Layout) -> float:
    """The most tokens per second the whole engine reaches under load."""
    tp, pp, ep = max(layout.tp, 1), max(layout.pp, 1), max(layout.ep, 1)
    replicas = 1 if layout.dp_attention else max(layout.dp, 1)
    if pp > 1:
        ceiling = PP8_CEILING * (pp * tp / 8) ** 0.5
    elif ep > 1:
        ceiling = TP8_CEILING + (EP8_CEILING - TP8_CEILING) * math.log2(ep) / math.log2(max(tp, 2))
        ceiling *= (tp / 8) ** 0.5
    else:
        ceiling = TP8_CEILING * (tp / 8) ** 0.5
    return ceiling * replicas


def per_request_rate(layout: Layout, running: int) -> float:
    """Tokens per second for each of `running` concurrent requests."""
    r1, ceiling = decode_rate_c1(layout), aggregate_ceiling(layout)
    return r1 / (1 + (max(running, 1) - 1) * r1 / ceiling)


async def _sleep_until(due: float) -> float:
    """Sleep until monotonic time `due`; return the time it woke."""
    delay = due - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    return time.monotonic()


def token_text(i: int) -> str:
    """The i-th generated token's text (a fixed, readable word stream)."""
    word = _WORDS[i % len(_WORDS)]
    return word if word in ",.:" else " " + word


def count_prompt_tokens(text: str) -> int:
    """A tokenizer's rough count: about four characters per token."""
    return max(1, (len(text) + 3) // 4)


class Generator:
    """Runs requests at the layout's pace and writes SGLang's batch log lines."""

    def __init__(self, layout: Layout, metrics: Metrics, max_total_tokens: int, on_load: Callable[[int], None],
                 batch_log: Callable[[str], None] | None = None,
                 step_gate: Callable[[], Awaitable[None]] | None = None) -> None:
        self.layout = layout
        self.batch_log = batch_log  # SGLang logs its batches; vLLM logs its own stats instead (None)
        self.step_gate = step_gate
        """Awaited before each forward step: over several hosts a step waits for every node's ranks."""
        self.metrics = metrics
        self.max_total_tokens = max(max_total_tokens, 1)
        self.on_load = on_load
        self.stall: Stall | None = None
        """A planned stall (console/sim/stall.py): each step waits on its gate."""
        self.running = 0
        self.last_output_at: float | None = None
        """POSIX time of the last token (SGLang's `last_receive_tstamp`, what its /health compares)."""
        self.used_tokens = 0
        self._steps = 0.0
        self._window: deque[float] = deque()  # decode-step times of the last 5 s

    def _usage(self) -> float:
        return self.used_tokens / self.max_total_tokens

    async def generate(self, prompt_tokens: int, max_tokens: int) -> AsyncIterator[str]:
        """Yield `max_tokens` token texts, the first after the prefill, then one per decode step."""
        stall = self.stall
        if stall is not None and (stall.engaged or stall.blocks_intake()):
            await stall.gate()  # a blocked scheduler never takes a request in: no gauge moves
        start = time.monotonic()
        chunked = stall is not None and stall.long_prefill()
        if self.batch_log is not None and not chunked:
            self._prefill_line(prompt_tokens)
        self.running += 1
        self.used_tokens += 0 if chunked else prompt_tokens
        self.metrics.request_started(prompt_tokens)
        self.on_load(self.running)
        produced, first_at, last_at = 0, None, start
        try:
            # Real seconds, whatever the time scale (that one speeds up start-up only), so a probe of the
            # demo measures the story's rates. Each token is due at the previous one's due time plus a
            # step: a late wake-up (a loaded CPU) then costs one token its time, never the rate.
            due = start + 0.03 + prompt_tokens / PREFILL_TOKENS_PER_S
            if chunked:
                assert stall is not None
                await self._chunked_prefill(prompt_tokens, stall)
                due = time.monotonic()
            else:
                self.metrics.realtime("prefill_compute", prompt_tokens)
            for i in range(max_tokens):
                if i:
                    due += 1.0 / per_request_rate(self.layout, self.running)
                if self.step_gate is not None:
                    await self.step_gate()
                if stall is not None:
                    await stall.gate()
                now = await _sleep_until(due)
                due = max(due, now - MAX_LAG_S)  # after a long stall, resume the pace instead of bursting
                if first_at is None:
                    first_at = now
                    self.metrics.observe_ttft(now - start)
                else:
                    self.metrics.observe_tpot(now - last_at)
                last_at = now
                produced += 1
                self.used_tokens += 1
                self._decode_step(now)
                yield token_text(i)
        finally:
            self.running -= 1
            self.used_tokens = max(0, self.used_tokens - prompt_tokens - produced)
            self.metrics.request_finished(produced, time.monotonic() - start)
            self.on_load(self.running)

    def _prefill_line(self, new_tokens: int) -> None:
        if self.batch_log is not None:
            self.batch_log(f"Prefill batch. #new-seq: 1, #new-token: {new_tokens}, #cached-token: 0, "
                           f"token usage: {self._usage():.2f}, #running-req: {self.running}, #queue-req: 0,")

    async def _chunked_prefill(self, prompt_tokens: int, stall: Stall) -> None:
        """A long prompt prefilled chunk by chunk: a batch line and more KV per chunk, no token counted."""
        chunk = max(1, prompt_tokens // stall.chunks)
        for _ in range(stall.chunks):
            self.running -= 1
            self._prefill_line(chunk)  # logged as the chunk is scheduled, the request not yet running
            self.running += 1
            await asyncio.sleep(stall.chunk_s)
            self.used_tokens += chunk
            self.metrics.realtime("prefill_compute", chunk)
            self.metrics.set_throughput(self.metrics.gen_throughput, self.running, self.used_tokens, self._usage())

    def _decode_step(self, now: float) -> None:
        self.metrics.generated(1)
        self.metrics.realtime("decode", 1)
        self.last_output_at = time.time()
        self._window.append(now)
        cutoff = now - 5.0
        while self._window and self._window[0] < cutoff:
            self._window.popleft()
        span = now - self._window[0] if len(self._window) > 1 else 0.0
        throughput = (len(self._window) - 1) / span if span > 0 else 0.0
        self.metrics.set_throughput(throughput, self.running, self.used_tokens, self._usage())
        before = int(self._steps // DECODE_LOG_INTERVAL)
        self._steps += 1.0 / max(self.running, 1)
        if int(self._steps // DECODE_LOG_INTERVAL) > before:
            if self.batch_log is not None:
                self.batch_log(f"Decode batch. #running-req: {self.running}, #token: {self.used_tokens}, "
                               f"token usage: {self._usage():.2f}, cuda graph: True, "
                               f"gen throughput (token/s): {throughput:.2f}, #queue-req: 0,")
