"""Runs the ops layer's switch for the UI: typed events go to `post`; an error becomes a failed result."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.events import FAILED, SwitchEvent, SwitchResult

if TYPE_CHECKING:
    from console.ops.audit import AuditLog


async def run_switch(host: Host, service: ServiceConfig, layout: str, *, force: bool,
                     post: Callable[[SwitchEvent], None], audit: AuditLog | None = None) -> SwitchResult:
    """Switch and return the final result; a failure the ops layer did not catch is a failed result."""
    from console.ops.switch import switch_layout

    try:
        return await switch_layout(host, service, layout, force=force, audit=audit, on_event=post)
    except Exception as exc:  # the UI shows it as a failed result card, never a traceback
        now = time.time()
        return SwitchResult(host=host.name, service=service.name, layout=layout, outcome=FAILED,
                            reason=str(exc) or type(exc).__name__, started_at=now, verdict_at=now)
