"""What a start over several nodes needs of the one-host starter (`start.LayoutStarter`), as a protocol:
the node code (nodes.py, group_follow.py) is called by the starter, so it names this face, not the class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.switch.events import SwitchEvent

EventSink = Callable[[SwitchEvent], None]


class Starter(Protocol):
    host: Host
    service: ServiceConfig
    emit: EventSink
    timeout_s: float
    state_poll_s: float
    health_poll_s: float

    def step(self, layout: str, t0: float, step: str, detail: str, *, unit: str | None = None,
             rollback: bool = False) -> None:
        """Emit one step of a start (or of its rollback), timed from `t0`."""
        ...
