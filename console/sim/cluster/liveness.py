"""How nodes keep each other alive: keep-alive timing, and when a silent peer is unresponsive or dead.

NCCL's RAS threads exchange a keep-alive every second, warn about a connection silent for 5 s and give
up on a peer unreachable for 60 s, all multiplied by NCCL_RAS_TIMEOUT_FACTOR (src/ras/ras_internal.h:
RAS_KEEPALIVE_INTERVAL, RAS_KEEPALIVE_TIMEOUT_WARN, RAS_PEER_DEAD_TIMEOUT). Here they are also multiplied
by the time scale, as every engine timeout of the simulation is, so the order of events stays the real
one: a peer is dead to RAS (60 s) long before SGLang's watchdog (300 s) or NCCL's (600 s) fires. The
unresponsive threshold never goes below one real second: a loaded machine's event-loop hiccup must not
look like a wedged host.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

RAS_TIMEOUT_FACTOR_ENV = "NCCL_RAS_TIMEOUT_FACTOR"
KEEPALIVE_S, UNRESPONSIVE_S, DEAD_S = 1.0, 5.0, 60.0
MIN_UNRESPONSIVE_S = 1.0

OK, UNRESPONSIVE, DEAD = "ok", "unresponsive", "dead"


@dataclass(frozen=True, slots=True)
class Liveness:
    """The keep-alive clock of one run, in real seconds."""

    keepalive_s: float
    """Between two keep-alives on a connection."""
    unresponsive_s: float
    """Silence after which a peer is missing from RAS's answers."""
    dead_s: float
    """Silence after which RAS considers a peer dead."""

    @classmethod
    def for_run(cls, time_scale: float, env: Mapping[str, str] | None = None) -> Liveness:
        """NCCL's timeouts times NCCL_RAS_TIMEOUT_FACTOR (a whole number, as NCCL reads it) and the time scale."""
        env = os.environ if env is None else env
        raw = env.get(RAS_TIMEOUT_FACTOR_ENV, "")
        factor = int(raw) if raw.isdigit() and int(raw) > 0 else 1
        unresponsive = max(UNRESPONSIVE_S * factor * time_scale, MIN_UNRESPONSIVE_S)
        keepalive = unresponsive / (UNRESPONSIVE_S / KEEPALIVE_S)
        dead = max(DEAD_S * factor * time_scale, unresponsive + 2 * keepalive)
        return cls(keepalive, unresponsive, dead)


@dataclass
class PeerState:
    """What this node knows of another node's liveness."""

    last_contact: float = field(default_factory=time.monotonic)
    """When it was last heard from (monotonic), directly or through node 0."""
    closed: bool = False
    """Its connection was closed (its process died or exited)."""
    dead_ranks: dict[int, float] = field(default_factory=dict)
    """Its ranks whose processes died while it lives on (an OOM kill), with when (monotonic)."""
    declared_dead: bool = False
    """It was once silent past the dead threshold: RAS never takes a dead peer back (it NACKs it)."""

    def heard(self, liveness: Liveness, now: float | None = None) -> None:
        """A message arrived from it (after a silence past the dead threshold it stays dead to RAS)."""
        now = time.monotonic() if now is None else now
        if now - self.last_contact >= liveness.dead_s:
            self.declared_dead = True
        self.last_contact = now

    def state(self, liveness: Liveness, now: float | None = None) -> str:
        """OK, UNRESPONSIVE (closed, or silent past the threshold) or DEAD (silent past the dead threshold)."""
        age = (time.monotonic() if now is None else now) - self.last_contact
        if self.declared_dead or age >= liveness.dead_s:
            return DEAD
        if self.closed or age >= liveness.unresponsive_s:
            return UNRESPONSIVE
        return OK

    def rank_state(self, rank: int, liveness: Liveness, now: float | None = None) -> str:
        """A rank's process: its node's state, or its own when it died alone."""
        now = time.monotonic() if now is None else now
        died = self.dead_ranks.get(rank)
        if died is not None:
            return DEAD if now - died >= liveness.dead_s else UNRESPONSIVE
        return self.state(liveness, now)


def aged_back(ages: Mapping[str, float], now: float) -> dict[int, float]:
    """{rank: seconds ago} as sent on the wire -> {rank: monotonic time}."""
    return {int(rank): now - float(age) for rank, age in ages.items()}


def beat_table(peers: Mapping[int, PeerState], own_dead: Mapping[int, float], now: float) -> dict[str, Any]:
    """What node 0 tells every node of every node: how long since it heard from each, and its dead ranks."""
    table: dict[str, Any] = {"0": {"age": 0.0, "closed": False, "dead": {str(r): a for r, a in own_dead.items()}}}
    for node, peer in peers.items():
        table[str(node)] = {"age": now - peer.last_contact, "closed": peer.closed, "gone": peer.declared_dead,
                            "dead": {str(r): now - t for r, t in peer.dead_ranks.items()}}
    return table


def apply_table(peers: MutableMapping[int, PeerState], table: Mapping[str, Any], me: int, now: float) -> None:
    """A node other than 0 takes node 0's table: node 0's dead ranks, and the others' states, aged."""
    for key, entry in table.items():
        other = int(key)
        dead = aged_back(entry.get("dead", {}), now)
        if other == me:
            continue
        if other == 0:
            peers[0].dead_ranks = dead
        else:
            peers[other] = PeerState(now - float(entry["age"]), bool(entry["closed"]), dead, bool(entry.get("gone")))
