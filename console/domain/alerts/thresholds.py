"""When the watch daemon's alerts fire: the thresholds an operator chooses, with the defaults we would choose.

The `[watch]` table of hosts.toml (console/config/watch.py) fills these; nothing here reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINE_FAILED = "ServeEngineFailed"
CRASH_LOOP = "ServeCrashLoop"
START_HUNG = "ServeStartHung"
HOST_UNREACHABLE = "ServeHostUnreachable"
HEALTH_FLAPPING = "ServeHealthFlapping"
KV_CACHE_HIGH = "ServeKvCacheHigh"
REQUESTS_WAITING = "ServeRequestsWaiting"
GPU_XID = "ServeGpuXid"
RANK_DEAD = "ServeRankDead"
HEALTH_DOWN = "ServeHealthDown"
STALLED = "ServeStalled"

#: Every alert the daemon raises, with its default severity (Alertmanager routes on the `severity` label).
DEFAULT_SEVERITIES: tuple[tuple[str, str], ...] = (
    (ENGINE_FAILED, "critical"),
    (CRASH_LOOP, "critical"),
    (START_HUNG, "warning"),
    (HOST_UNREACHABLE, "critical"),
    (HEALTH_FLAPPING, "warning"),
    (KV_CACHE_HIGH, "warning"),
    (REQUESTS_WAITING, "warning"),
    (GPU_XID, "critical"),
    (RANK_DEAD, "critical"),
    (HEALTH_DOWN, "critical"),
    (STALLED, "critical"),
)
ALERT_NAMES = tuple(name for name, _ in DEFAULT_SEVERITIES)


@dataclass(frozen=True, slots=True)
class AlertThresholds:
    """The rules' numbers. Each alert resolves when its condition ends."""

    crash_loop_restarts: int = 3
    """A unit restarted this many times within `crash_loop_window_s` is crash-looping."""
    crash_loop_window_s: float = 600.0
    """The crash loop's window; the alert resolves once a whole window passes without a restart."""
    start_hang_s: float = 600.0
    """A start with no new phase (nor progress within one) for this long hangs."""
    unreachable_s: float = 60.0
    """A host whose state could not be read (or whose data is older) for this long is unreachable."""
    flapping_changes: int = 4
    """`/health` changing between ready and not ready this often within `flapping_window_s` flaps."""
    flapping_window_s: float = 300.0
    kv_usage_ratio: float = 0.95
    """KV cache usage (0..1) at or above this for `kv_usage_for_s` fires."""
    kv_usage_for_s: float = 300.0
    waiting_requests: float = 32.0
    """Requests waiting at or above this for `waiting_for_s` fires."""
    waiting_for_s: float = 300.0
    rank_dead_s: float = 60.0
    """A rank reported dead or wedged for this long fires (where the status reports ranks)."""
    health_down_s: float = 180.0
    """`/health` down or unreadable this long while a unit runs whose start was ready fires."""
    failure_settle_s: float = 0.4
    """A summary of a death (systemd's exit status) waits this long for its cause before it fires."""
    state_grace_s: float = 2.0
    """A failure the unit state shows first waits this long for the journal to name its cause."""
    severities: tuple[tuple[str, str], ...] = DEFAULT_SEVERITIES

    def severity(self, alertname: str) -> str:
        """The severity label of an alert."""
        return dict(self.severities).get(alertname, "warning")
