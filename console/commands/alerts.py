"""`serve-console alerts`: what the watch daemon raised, newest first, from the state file."""

from __future__ import annotations

import argparse
import sys
import time

from console.commands.host_args import print_json
from console.domain.safe_text import shown


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "alerts",
        help="alerts the watch daemon raised: what fired, when, and when it resolved",
        description="Every alert `serve-console watch` raised, newest first, from the state file; then what it "
        "still owes each destination (queued, dropped).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per alert")
    parser.add_argument("--firing", action="store_true", help="only the alerts that fire now")
    parser.add_argument("--host", metavar="H", help="only this host's alerts")
    parser.add_argument("-n", type=int, default=None, metavar="N", help="only the newest N alerts")
    parser.set_defaults(func=run)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def alert_line(alert, now: float) -> str:
    """`FIRING   2026-05-26 00:06:20 (for 12 min)  ServeCrashLoop demo/k26 unit: summary`."""
    where = "/".join(v for v in (alert.label("host"), alert.label("service")) if v)
    unit = f" {alert.label('unit')}" if alert.label("unit") else ""
    if alert.firing:
        state = f"FIRING   {_when(alert.starts_at)} (for {_span(now - alert.starts_at)})"
    else:
        state = f"resolved {_when(alert.starts_at)} -> {_when(alert.ends_at)} ({_span(alert.ends_at - alert.starts_at)})"
    return shown(f"{state}  {alert.label('alertname')} [{alert.label('severity')}] {where}{unit}: "
                 f"{alert.annotation('summary')}")


def run(args: argparse.Namespace) -> int:
    from console.ops.watch import open_alert_store

    store = open_alert_store()
    try:
        alerts = store.alerts(limit=args.n, firing_only=args.firing, host=args.host)
        counters, queued = store.counters(), store.queued()
        damaged = store.damage_lines()
    finally:
        store.close()
    for line in damaged:
        print(f"serve-console alerts: {line}", file=sys.stderr)
    now = time.time()
    for alert in alerts:
        if args.json:
            print_json({"event": "alert", "id": alert.id, **alert.to_json()})
        else:
            print(alert_line(alert, now))
    if args.json:
        return 0
    if not alerts:
        print("no alerts recorded" + (" firing" if args.firing else "") + " (serve-console watch records them)")
    if queued or counters:
        lost = ", ".join(f"{name} {value}" for name, value in counters.items())
        print(shown(f"{queued} deliveries queued" + (f"; {lost}" if lost else "")))
    return 0
