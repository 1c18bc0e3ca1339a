"""`serve-console restart`: restart a service's running unit and watch it until READY or FAILED."""

from __future__ import annotations

import argparse
import asyncio

from console.commands.service_actions import add_action_options, target


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "restart",
        help="restart the unit a service runs and watch it come up (it is down meanwhile)",
        description="Restart the running layout's unit, then watch journal, unit state and health as a "
        "switch does. Exit 0 ready, 1 failed/timeout/refused/nothing running, 2 usage or config error.",
    )
    add_action_options(parser)
    parser.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="seconds to wait (default 900)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError

    if not args.timeout > 0:
        raise UsageError("--timeout must be positive")
    host_cfg, service = target(args, "restart")
    return asyncio.run(_restart(host_cfg, service, args))


async def _restart(host_cfg, service, args: argparse.Namespace) -> int:
    from console.commands.host_args import print_json
    from console.commands.switch_output import HumanPrinter, JsonPrinter
    from console.domain.safe_text import shown
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.switch import NOTHING, READY, restart_service

    host = open_host(host_cfg)
    audit = open_audit()
    printer = JsonPrinter() if args.json else HumanPrinter(host.name, service.name)
    try:
        result = await restart_service(host, service, audit=audit, timeout_s=args.timeout, on_event=printer)
    finally:
        audit.close()
        await host.close()
    if result.outcome == NOTHING:  # no events were emitted: say it here
        if args.json:
            print_json(result.to_json())
        else:
            print(shown(f"{result.host}/{result.service}: NOT RESTARTED: {result.reason}"))
            if result.evidence is not None:
                print(shown(f"  evidence: {result.evidence}"))
    return 0 if result.outcome == READY else 1
