"""`serve-console tail`: a service's journal with the findings of triage marked."""

from __future__ import annotations

import argparse
import asyncio
import time

from console.commands.host_args import add_host_option, pick_target, print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tail",
        help="the journal of a service's unit, findings marked",
        description="The running layout's unit (or the one that ran last), or --unit. Findings of triage "
        "are marked with `>>` (or carry a `finding` object with --json). The console's own probe "
        "requests (its /health, /metrics and /v1/models polls in the engine's access log) are hidden, "
        "as the TUI folds them, unless --probes.",
    )
    add_host_option(parser)
    parser.add_argument("--unit", metavar="U", help="this unit instead of the service's current one")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")
    parser.add_argument("--json", action="store_true", help="one JSON object per entry (secrets masked)")
    parser.add_argument("--no-redact", action="store_true",
                        help="with --json, the host's exact text, API keys and tokens included")
    parser.add_argument("-n", type=int, default=50, metavar="N", help="entries before following (default 50)")
    parser.add_argument("--probes", action="store_true",
                        help="show the console's own /health, /metrics and /v1/models requests (hidden, as the "
                        "TUI folds them)")
    parser.set_defaults(func=run)


#: Without --probes, the last N entries worth showing are looked for among this many more: an idle
#: engine's journal is mostly the console's own probes.
PROBE_HISTORY = 2000


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError

    if args.n < 0:
        raise UsageError("-n must not be negative")
    if args.no_redact and not args.json:
        raise UsageError("tail: --no-redact goes with --json (the text output always masks secrets)")
    config, host_cfg, service = pick_target(args)
    return asyncio.run(_tail(host_cfg, service, args))


async def _tail(host_cfg, service, args: argparse.Namespace) -> int:
    from console.domain.redact import redact
    from console.domain.safe_text import shown
    from console.domain.triage import Triager
    from console.factory import open_host
    from console.ops.status import unit_states

    host = open_host(host_cfg)
    try:
        unit = args.unit
        if unit is not None:
            await _check_unit_exists(host, service, unit)
        else:
            states = await unit_states(host, service)
            running = [s for s in states if s.is_running]
            latest = sorted(states, key=lambda s: s.since or 0.0)
            unit = running[0].unit if running else (latest[-1].unit if latest else service.all_units()[0])
        triager = Triager(service.engine)
        # JSON output is shipped and stored: secrets are masked there too unless asked (--no-redact);
        # json.dumps escapes every control character, so nothing else is changed.
        exact = (lambda text: text) if args.no_redact else redact
        async for entry, findings in _worth_showing(host, unit, triager, args):
            if args.json:
                finding = findings[0].to_json() if findings else None
                if finding is not None:
                    finding["line"] = exact(finding["line"])
                print_json(
                    {
                        "event": "journal",
                        "cursor": entry.cursor,
                        "ts": entry.ts,
                        "unit": entry.unit,
                        "source": entry.source,
                        "priority": entry.priority,
                        "message": exact(entry.message),
                        "finding": finding,
                    }
                )
                continue
            stamp = time.strftime("%H:%M:%S", time.localtime(entry.ts)) + f".{int(entry.ts % 1 * 1000):03d}"
            # The message is the host's text: secrets masked, controls shown as escapes (JSON keeps it exact).
            print(f"{stamp} {shown(entry.unit)}: {shown(entry.message)}", flush=True)
            for f in findings:
                print(f">> {f.cls.value}{' ' + shown(f.rank) if f.rank else ''}: {shown(f.summary)}", flush=True)
    finally:
        await host.close()
    return 0


async def _worth_showing(host, unit: str, triager, args: argparse.Namespace):
    """(entry, findings) of the last `-n` entries, then (with -f) of each new one; every entry goes
    through the triager in order, and the console's own probe requests are left out unless --probes
    (a line with a finding is always shown)."""
    from collections import deque

    from console.domain.probe_lines import is_probe_line

    def keep(entry, findings) -> bool:
        return args.probes or bool(findings) or not is_probe_line(entry.message)

    journal = host.services.journal
    if args.probes:  # every entry counts: the journal's own -n, in one stream
        async for entry in journal(unit, follow=args.follow, lines=args.n):
            yield entry, triager.feed(entry.message, entry.ts, entry.by_systemd)
        return
    last: deque = deque(maxlen=args.n)
    cursor = None
    if args.n:
        async for entry in journal(unit, follow=False, lines=args.n + PROBE_HISTORY):
            cursor = entry.cursor
            findings = triager.feed(entry.message, entry.ts, entry.by_systemd)
            if keep(entry, findings):
                last.append((entry, findings))
    for item in last:
        yield item
    if not args.follow:
        return
    # Exactly after what was read; with nothing read, only new entries (or all: the journal was empty).
    stream = (journal(unit, after_cursor=cursor, follow=True) if cursor is not None
              else journal(unit, follow=True, lines=0 if not args.n else None))
    async for entry in stream:
        findings = triager.feed(entry.message, entry.ts, entry.by_systemd)
        if keep(entry, findings):
            yield entry, findings


async def _check_unit_exists(host, service, unit: str) -> None:
    """A unit the journal never heard of is an error, not an empty tail, unless it is one of the service's.

    systemd loads any instance of a template (`sglang@nope.service`), so its LoadState alone cannot tell.

    Raises:
        HostError: no such unit (exit 1), naming the host and the service's own units.
    """
    from console.errors import HostError

    if unit in service.all_units() and (await host.services.state(unit)).load != "not-found":
        return
    async for _entry in host.services.journal(unit, follow=False, lines=1):
        return  # a removed unit's journal is still worth reading
    units = ", ".join(service.all_units())
    raise HostError(host.name, f"no unit {unit!r} (and no journal of one); {service.name} runs {units}")
