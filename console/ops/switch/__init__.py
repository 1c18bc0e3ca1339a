"""Switching a service's layout: preflight, stop and start, the watch, rollback, the locks, the events.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.switch.events import (
    FAILED,
    READY,
    REFUSED,
    UNCHANGED,
    FindingEvent,
    HealthEvent,
    PhaseEvent,
    ProgressEvent,
    ResultEvent,
    StateEvent,
    StepEvent,
    SwitchEvent,
    SwitchResult,
)
from console.ops.switch.failure_text import failure_kind, failure_rows, headline
from console.ops.switch.locks import explore_lock_name
from console.ops.switch.orchestrate import resolve, switch_layout
from console.ops.switch.service_control import NOTHING, STOPPED, restart_service, stop_service

__all__ = [
    "explore_lock_name",
    "FAILED",
    "failure_kind",
    "failure_rows",
    "FindingEvent",
    "headline",
    "HealthEvent",
    "NOTHING",
    "PhaseEvent",
    "ProgressEvent",
    "READY",
    "REFUSED",
    "resolve",
    "restart_service",
    "ResultEvent",
    "StateEvent",
    "StepEvent",
    "stop_service",
    "STOPPED",
    "switch_layout",
    "SwitchEvent",
    "SwitchResult",
    "UNCHANGED",
]
