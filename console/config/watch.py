"""The `[watch]` table of hosts.toml: where `serve-console watch` sends its alerts, and when they fire.

Every key is optional. Credentials never live here: Alertmanager's Authorization header and the
webhook's URL and header come from the environment (console/hosts/endpoints/alert_sinks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.config.fields import Table, url_problem, value_repr
from console.domain.alerts import ALERT_NAMES, AlertThresholds

WATCH_KEYS = ("alertmanager", "interval_s", "resend_s", "queue_max", "crash_loop_restarts", "crash_loop_window_s",
              "start_hang_s", "unreachable_s", "flapping_changes", "flapping_window_s", "kv_usage_pct",
              "kv_usage_for_s", "waiting_requests", "waiting_for_s", "rank_dead_s", "health_down_s", "severity")
SEVERITY = re.compile(r"[A-Za-z0-9_-]{1,32}")
DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """The `[watch]` table: the watch daemon's destinations, pace and thresholds."""

    alertmanagers: tuple[str, ...] = ()
    """Alertmanager base URLs (each gets every alert, as Prometheus sends to every member of a cluster)."""
    interval_s: float = 5.0
    """Seconds between readings of each host's unit states, health and engine gauges (the journal is live)."""
    resend_s: float = 60.0
    """Firing alerts are sent again this often; each ends 4 resends later unless sent again."""
    queue_max: int = 10_000
    """Deliveries kept per destination while it is down; beyond, the oldest resolved ones go first."""
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    line: int | None = None


def _urls(table: Table) -> tuple[str, ...]:
    value = table.data.get("alertmanager")
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise table.error("alertmanager", f"expected a URL or an array of URLs, got {value_repr(value)}")
    out = []
    for url in items:
        if "@" in url.partition("://")[2].partition("/")[0]:
            raise table.error("alertmanager", "credentials do not belong in hosts.toml: set "
                              "SERVE_CONSOLE_ALERTMANAGER_AUTHORIZATION")
        if problem := url_problem(url):
            raise table.error("alertmanager", f"expected an http(s) URL such as \"http://alertmanager:9093\" "
                              f"({problem}), got {value_repr(url)}")
        out.append(url.rstrip("/"))
    return tuple(out)


def _severities(table: Table) -> tuple[tuple[str, str], ...]:
    defaults = dict(AlertThresholds().severities)
    sub = table.table("severity")
    if sub is not None:
        sub.check_keys(ALERT_NAMES)
        for name in sub.data:
            defaults[name] = sub.text(name, pattern=SEVERITY, describe="a severity such as \"critical\"")  # type: ignore[assignment]
    return tuple(defaults.items())


def parse_watch(table: Table | None) -> WatchConfig:
    """Validate `[watch]` (absent: every default, and no Alertmanager)."""
    if table is None:
        return WatchConfig()
    table.check_keys(WATCH_KEYS)
    d, t = WatchConfig(), AlertThresholds()

    def seconds(key: str, default: float) -> float:
        return table.number(key, default, above=0.0, maximum=DAY_S)  # type: ignore[return-value]

    kv_pct = table.number("kv_usage_pct", 100 * t.kv_usage_ratio, above=0.0, maximum=100.0)
    assert kv_pct is not None
    thresholds = AlertThresholds(
        crash_loop_restarts=table.integer("crash_loop_restarts", t.crash_loop_restarts, minimum=1, maximum=100_000),  # type: ignore[arg-type]
        crash_loop_window_s=seconds("crash_loop_window_s", t.crash_loop_window_s),
        start_hang_s=seconds("start_hang_s", t.start_hang_s),
        unreachable_s=seconds("unreachable_s", t.unreachable_s),
        flapping_changes=table.integer("flapping_changes", t.flapping_changes, minimum=2, maximum=100_000),  # type: ignore[arg-type]
        flapping_window_s=seconds("flapping_window_s", t.flapping_window_s),
        kv_usage_ratio=kv_pct / 100,
        kv_usage_for_s=seconds("kv_usage_for_s", t.kv_usage_for_s),
        waiting_requests=table.number("waiting_requests", t.waiting_requests, above=0.0, maximum=1e9),  # type: ignore[arg-type]
        waiting_for_s=seconds("waiting_for_s", t.waiting_for_s),
        rank_dead_s=seconds("rank_dead_s", t.rank_dead_s),
        health_down_s=seconds("health_down_s", t.health_down_s),
        severities=_severities(table),
    )
    return WatchConfig(
        alertmanagers=_urls(table),
        interval_s=table.number("interval_s", d.interval_s, above=0.0, maximum=3600.0),  # type: ignore[arg-type]
        resend_s=table.number("resend_s", d.resend_s, above=0.0, maximum=3600.0),  # type: ignore[arg-type]
        queue_max=table.integer("queue_max", d.queue_max, minimum=10, maximum=10_000_000),  # type: ignore[arg-type]
        thresholds=thresholds,
        line=table.line,
    )
