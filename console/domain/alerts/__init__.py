"""When an alert fires and when it resolves: the watch daemon's rules, pure (no I/O, no clock of its own).

The daemon (console/ops/watch/) observes hosts and feeds these values; the rules say which conditions
hold; the book turns that into alerts that fire, update and resolve, with stable identities.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.domain.alerts.alert import (
    LABEL_KEYS,
    Alert,
    Condition,
    Scope,
    Verdict,
    alert_from,
    clean,
    fingerprint,
    rfc3339,
)
from console.domain.alerts.book import FIRING, RESOLVED, UPDATED, AlertBook, Transition
from console.domain.alerts.host_rules import HostWatch
from console.domain.alerts.service_rules import RankLiveness, ServiceWatch, ServingState
from console.domain.alerts.thresholds import (
    ALERT_NAMES,
    CRASH_LOOP,
    DEFAULT_SEVERITIES,
    ENGINE_FAILED,
    GPU_XID,
    HEALTH_DOWN,
    HEALTH_FLAPPING,
    HOST_UNREACHABLE,
    KV_CACHE_HIGH,
    RANK_DEAD,
    REQUESTS_WAITING,
    STALLED,
    START_HUNG,
    AlertThresholds,
)
from console.domain.alerts.unit_watch import UnitWatch

__all__ = [
    "ALERT_NAMES",
    "Alert",
    "alert_from",
    "AlertBook",
    "AlertThresholds",
    "clean",
    "Condition",
    "CRASH_LOOP",
    "DEFAULT_SEVERITIES",
    "ENGINE_FAILED",
    "fingerprint",
    "FIRING",
    "GPU_XID",
    "HEALTH_DOWN",
    "HEALTH_FLAPPING",
    "HOST_UNREACHABLE",
    "HostWatch",
    "KV_CACHE_HIGH",
    "LABEL_KEYS",
    "RANK_DEAD",
    "STALLED",
    "RankLiveness",
    "ServingState",
    "REQUESTS_WAITING",
    "RESOLVED",
    "rfc3339",
    "Scope",
    "ServiceWatch",
    "START_HUNG",
    "Transition",
    "UnitWatch",
    "UPDATED",
    "Verdict",
]
