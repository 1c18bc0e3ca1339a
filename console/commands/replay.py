"""`serve-console replay BUNDLE [--json] [--redact-hosts [-o OUT]]`: an incident bundle, played back.

The timeline (docs/bundle.md) in time order: with `--json` one JSON object per record as the bundle
holds it (journal lines, unit states, switch events, the verdict, the failure card, the evidence's
manifest); without it, one plain line per record, then the failure card as the console showed it.
`--redact-hosts` writes a copy with host names and addresses replaced, for sharing, and prints its path.
Nothing is contacted. Exit 0; 2 for a file that is not a whole bundle.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="play back an incident bundle (what a failed switch recorded)",
        description="Print an incident bundle's timeline in time order: journal lines of every unit on every "
        "node, unit states, the switch's events, its verdict and the failure card. Contacts no host.",
    )
    parser.add_argument("bundle", metavar="BUNDLE", help="the bundle file (`bundle` in switch --json's result)")
    parser.add_argument("--json", action="store_true", help="one JSON object per timeline record, in time order")
    parser.add_argument("--redact-hosts", action="store_true",
                        help="write a copy with host names and addresses replaced, for sharing")
    parser.add_argument("-o", "--output", metavar="OUT", default=None,
                        help="where --redact-hosts writes (default: BUNDLE with .shared before .jsonl.gz)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.domain.safe_text import shown
    from console.ops.bundle import read_bundle, redact_hosts

    path = Path(args.bundle)
    bundle = read_bundle(path)
    if args.redact_hosts:
        out = Path(args.output) if args.output else _shared_name(path)
        size = redact_hosts(bundle, out)
        print(shown(f"{out} ({size} bytes): host names and addresses replaced"))
        return 0
    if args.json:
        for record in bundle.timeline:
            print(json.dumps(record))  # ensure_ascii: no control or bidi character live
        return 0
    for record in bundle.timeline:
        print(shown(text_line(record)))
    card = next((r for r in bundle.timeline if r["record"] == "card"), None)
    if card is not None:
        print(shown(f"failure card: {card.get('headline', '')}"))
        for row in card.get("rows", []):
            print(shown(f"  {row.get('label') or 'log':<9} {row.get('value', '')}"))
    return 0


def _shared_name(path: Path) -> Path:
    name = path.name.removesuffix(".jsonl.gz")
    return path.with_name(f"{name}.shared.jsonl.gz")


def _stamp(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}"


def text_line(record: dict[str, Any]) -> str:
    """One timeline record in one plain line, its time (UTC) first."""
    kind, at = record["record"], _stamp(record["ts"])
    if kind == "journal":
        return f"{at} journal  {record.get('node')} {record.get('unit')}: {record.get('message', '')}"
    if kind == "unit_state":
        state = record.get("error") or f"{record.get('active')} ({record.get('sub')}, {record.get('result')})"
        return f"{at} state    {record.get('node')} {record.get('unit')} {state} [{record.get('origin')}]"
    if kind == "switch":
        event = record.get("event") or {}
        back = "rollback " if event.get("rollback") else ""
        what = event.get("detail") or event.get("summary") or event.get("phase") or event.get("outcome") or ""
        return f"{at} switch   {back}{event.get('layout')} {event.get('event')} {event.get('step') or ''} {what}"
    if kind == "verdict":
        result = record.get("result") or {}
        return f"{at} verdict  {result.get('layout')} {result.get('outcome')}: {result.get('reason', '')}"
    if kind == "card":
        return f"{at} card     {record.get('headline', '')}"
    return f"{at} {kind:<8} {record.get('path', '')}"
