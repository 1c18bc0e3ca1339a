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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.domain.text import shown
    from console.ops.audit import open_audit

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
        flags = (" forced" if e.forced else "") + (f" rollback of #{e.rollback_of}" if e.rollback_of else "")
        timing = f" in {e.elapsed_s:.1f} s" if e.elapsed_s is not None else ""
        detected = f", detected after {e.detected_after_s:.2f} s" if e.detected_after_s else ""
        print(shown(f"#{e.id} {when} {e.host}/{e.service} {move}{flags}: {e.outcome}{timing}{detected}"))
        if e.reason and e.outcome != "ready":  # a reason may quote the host's journal
            print(f"    {shown(e.reason)}")
    if not entries and not args.json:
        print("no switches recorded yet")
    return 0
