"""How a service's last run ended, when nothing of it runs now: the engine's own death, read from the
unit's journal.

A unit's state alone can hide a death. vLLM's API server exits 0 after its engine core is killed, so
systemd logs `Deactivated successfully` and the unit is `inactive`, as after a clean stop; only the
journal says `MPClient: engine core exited unexpectedly`. The last run's journal is triaged as the switch
triages a start (a stop that was asked for is never a death), and its decisive finding is the death.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.domain.triage import Triager
from console.domain.values import Finding, UnitState

if TYPE_CHECKING:
    from console.config import ServiceConfig
    from console.hosts.base import Host

#: Journal lines read back for the last run: enough for a start's whole log and the traceback that ends it.
DEATH_LINES = 2000
_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Death:
    """The unit whose run ended last, and what ended it."""

    unit: str
    finding: Finding
    unit_active: str
    """The unit's ActiveState now: `failed`, or `inactive` when the engine exited 0 after dying."""

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "kind": self.finding.cls.value,
            "summary": self.finding.summary,
            "line": self.finding.line,
            "at": self.finding.ts,
            "hint": self.finding.hint,
            "unit_active": self.unit_active,
        }

    def words(self) -> str:
        how = "failed" if self.unit_active == "failed" else f"exited ({self.unit_active})"
        return f"{self.unit} {how}: {self.finding.cls.value}: {self.finding.summary}"


#: How long "no death" is believed while the states stay the same: the journal may trail the state.
NO_DEATH_TTL_S = 10.0
# (host, service, the states seen) -> (the death, when it was read): a run that has ended does not change.
_deaths: OrderedDict[tuple, tuple[Death | None, float]] = OrderedDict()


async def last_ended(host: Host, states: Sequence[UnitState]) -> UnitState | None:
    """The unit whose run ended last, when none runs; None when one runs or none has run.

    Real systemd unloads an inactive template instance, and with it every timestamp (`since` is None
    then), at its own moment for each unit: where a unit does not say when it stopped, its journal's last
    entry does.
    """
    if any(s.is_running for s in states):
        return None
    last: tuple[float, UnitState] | None = None
    for state in states:
        when = state.since
        if when is None:
            with contextlib.suppress(Exception):
                async for entry in host.services.journal(state.unit, follow=False, lines=1):
                    when = entry.ts
        if when is not None and (last is None or when > last[0]):
            last = (when, state)
    return last[1] if last is not None else None


async def last_death(host: Host, service: ServiceConfig, states: Sequence[UnitState]) -> Death | None:
    """The death of the service's last run, when nothing of it runs and its journal names a fatal cause.

    A host whose journal cannot be read gives None: the unit's state still tells what it can.
    """
    if any(s.is_running for s in states):
        return None
    key = (host.name, service.name, tuple((s.unit, s.active, s.sub, s.result, s.since) for s in states))
    now = time.monotonic()
    if key in _deaths:
        death, read_at = _deaths[key]
        if death is not None or now - read_at < NO_DEATH_TTL_S:
            return death
    state = await last_ended(host, states)
    death = await _read_death(host, service, state) if state is not None else None
    _deaths[key] = (death, now)
    _deaths.move_to_end(key)
    while len(_deaths) > _CACHE_SIZE:
        _deaths.popitem(last=False)
    return death


async def _read_death(host: Host, service: ServiceConfig, state: UnitState) -> Death | None:
    triager = Triager(service.engine)
    try:
        async for entry in host.services.journal(state.unit, follow=False, lines=DEATH_LINES):
            triager.feed(entry.message, entry.ts, entry.by_systemd)
    except Exception:
        return None
    triager.finish()
    cause = triager.decisive()
    return Death(state.unit, cause, state.active) if cause is not None and cause.fatal else None
