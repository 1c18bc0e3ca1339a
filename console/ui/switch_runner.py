"""Runs the ops layer's switch for the UI: events become dicts, errors become a result, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.config import ServiceConfig
from console.hosts.base import Host

if TYPE_CHECKING:
    from console.ops.audit import AuditLog


async def run_switch(host: Host, service: ServiceConfig, layout: str, *, force: bool,
                     post: Callable[[dict[str, Any]], None], audit: AuditLog | None = None) -> dict[str, Any]:
    """Switch and return the final result dict (`{"event": "result", ...}`); events go to `post`."""
    from console.ops.switch import switch_layout

    try:
        result = await switch_layout(host, service, layout, force=force, audit=audit,
                                     on_event=lambda event: post(event.to_json()))
    except Exception as exc:  # the UI shows it as a failed result card
        return {"event": "result", "outcome": "failed", "host": host.name, "service": service.name,
                "layout": layout, "reason": str(exc) or type(exc).__name__, "failure": None, "rollback": None}
    return result.to_json()
