"""`serve-console history`: the audit log of switches, oldest first."""

from __future__ import annotations

import argparse
import time

from console.commands.host_args import print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "history",
        help="past switches with their outcome and timings (the audit log)",
        description="Every switch from the audit log in the state dir, oldest first.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per switch")
    parser.add_argument("--host", metavar="H", help="only switches on this host")
    parser.add_argument("-n", type=int, default=None, metavar="N", help="only the newest N switches")
    parser.add_argument("--web", action="store_true",
                        help="the browser sessions of `serve-console web` instead: who, when, how they ended")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.domain.safe_text import shown
    from console.ops.audit import open_audit

    if args.web:
        if args.host is not None:
            from console.errors import UsageError

            raise UsageError("--host filters switches; a web session belongs to no host")
        return _web_sessions(args)

    audit = open_audit()
    try:
        entries = audit.entries(limit=args.n, host=args.host)
    finally:
        audit.close()
    for e in entries:
        if args.json:
            print_json(e.to_json())
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.started_at))
        move = f"{e.from_layout or '-'} -> {e.to_layout}"
        # a rollback starts without a preflight, by the console's choice: not an operator's forced switch
        forced = e.forced and not e.rollback_of
        flags = (" forced" if forced else "") + (f" rollback of #{e.rollback_of}" if e.rollback_of else "")
        timing = f" in {e.elapsed_s:.1f} s" if e.elapsed_s is not None else ""
        detected = f", detected after {e.detected_after_s:.2f} s" if e.detected_after_s else ""
        print(shown(f"#{e.id} {when} {e.host}/{e.service} {move}{flags}: {e.outcome}{timing}{detected}"))
        if e.reason and e.outcome != "ready":  # a reason may quote the host's journal
            print(f"    {shown(e.reason)}")
    if not entries and not args.json:
        print("no switches recorded yet")
    return 0


def _web_sessions(args: argparse.Namespace) -> int:
    """`history --web`: one line per browser session, oldest first."""
    from console.domain.safe_text import shown
    from console.ops.session_log import open_web_sessions

    log = open_web_sessions()
    try:
        sessions = log.sessions(limit=args.n)
    finally:
        log.close()
    for s in sessions:
        if args.json:
            print_json(s.to_json())
            continue
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_at))
        end = time.strftime("%H:%M:%S", time.localtime(s.ended_at)) if s.ended_at is not None else "…"
        mode = "read-only" if s.readonly else "actions allowed"
        why = f" ({s.reason})" if s.reason else ""
        print(shown(f"#{s.id} {start} - {end} {s.remote} {mode}: {s.outcome}{why}"))  # a reason may quote an error
    if not sessions and not args.json:
        print("no web sessions recorded yet")
    return 0
