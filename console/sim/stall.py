"""The stalls a real engine falls into while its processes live and its HTTP server answers (docs/stalls.md).

Switched on like the engines' other faults (`--fail KIND` or `SERVE_CONSOLE_SIM_FAIL=KIND`), after
READY and `SERVE_CONSOLE_SIM_STALL_AFTER_S` seconds of serving (real seconds, default 0: the first
client request after READY):
- `stall`: the scheduler is blocked (as under `kill -STOP` of the engine core, or a stuck core loop):
  no step runs, the GPUs go idle, requests are accepted and never answered, every gauge freezes;
- `spin`: every rank waits in a collective that never completes: each GPU reads ~100 % SM utilisation
  at near idle power, nothing moves;
- `diverged`: one rank left the collective (a kernel hang, a lost peer): its GPU is idle at 0 % while
  the others spin;
- `long_prefill`: not a stall: each request's prefill runs chunk by chunk
  (`SERVE_CONSOLE_SIM_PREFILL_CHUNKS` chunks of `SERVE_CONSOLE_SIM_PREFILL_CHUNK_S` seconds), the KV
  usage rising and SGLang logging a `Prefill batch` line per chunk, and no token counter moving until
  its first token.
`SERVE_CONSOLE_SIM_STALL_FOR_S` ends a stall after that many seconds (as `kill -CONT` would).
"""

from __future__ import annotations

import asyncio
import os
import time

STALL_AFTER_ENV = "SERVE_CONSOLE_SIM_STALL_AFTER_S"
#: How long a stall lasts before steps run again (as after `kill -CONT`); unset: for ever.
STALL_FOR_ENV = "SERVE_CONSOLE_SIM_STALL_FOR_S"
PREFILL_CHUNK_S_ENV = "SERVE_CONSOLE_SIM_PREFILL_CHUNK_S"
PREFILL_CHUNKS_ENV = "SERVE_CONSOLE_SIM_PREFILL_CHUNKS"
FAIL_STALL, FAIL_SPIN, FAIL_DIVERGED, FAIL_LONG_PREFILL = "stall", "spin", "diverged", "long_prefill"
STALL_FAILURES = (FAIL_STALL, FAIL_SPIN, FAIL_DIVERGED, FAIL_LONG_PREFILL)
#: What a spinning card draws (W): near idle, against the simulated card's ~560 W at full compute.
SPIN_POWER_W = 62.0
#: An idle card's draw (W).
IDLE_POWER_W = 38.0


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


class Stall:
    """One engine's planned stall: armed at READY, engaged by the first step due after `after_s`."""

    def __init__(self, kind: str, *, after_s: float | None = None) -> None:
        self.kind = kind
        self.after_s = _env_float(STALL_AFTER_ENV, 0.0) if after_s is None else after_s
        self.armed_at: float | None = None
        self.engaged_at: float | None = None
        """When the first step blocked (monotonic): the last token came just before."""
        self.on_engage: list = []
        self.on_end: list = []
        self.for_s = _env_float(STALL_FOR_ENV, 0.0) or None
        self.ended = False
        self._never = asyncio.Event()
        self.chunk_s = _env_float(PREFILL_CHUNK_S_ENV, 6.0)
        self.chunks = max(1, int(_env_float(PREFILL_CHUNKS_ENV, 8)))

    @property
    def blocks(self) -> bool:
        """This kind stops every step (long_prefill does not)."""
        return self.kind != FAIL_LONG_PREFILL

    def arm(self) -> None:
        """The server is READY (its warm-up is done): the stall may begin."""
        self.armed_at = time.monotonic()

    @property
    def engaged(self) -> bool:
        return self.engaged_at is not None

    def due(self) -> bool:
        return (self.blocks and not self.ended and self.armed_at is not None
                and time.monotonic() >= self.armed_at + self.after_s)  # fmt: skip

    async def gate(self) -> None:
        """Awaited before each step: returns at once, or never once the stall has begun."""
        if self.ended or not (self.engaged or self.due()):
            return
        if self.engaged_at is None:
            self.engaged_at = time.monotonic()
            for callback in self.on_engage:
                callback()
            if self.for_s is not None:
                asyncio.get_running_loop().call_later(self.for_s, self._end)
        await self._never.wait()

    def _end(self) -> None:
        """Steps run again: every waiting step goes on."""
        self.ended = True
        self._never.set()
        for callback in self.on_end:
            callback()

    def blocks_intake(self) -> bool:
        """A blocked scheduler takes no new request in (the collectives' stalls hold the batch they run)."""
        return self.kind == FAIL_STALL and self.due()

    def long_prefill(self) -> bool:
        return self.kind == FAIL_LONG_PREFILL and self.armed_at is not None


def stall_from(fail: str | None) -> Stall | None:
    """The stall a `--fail` value asks for, or None."""
    return Stall(fail) if fail in STALL_FAILURES else None
