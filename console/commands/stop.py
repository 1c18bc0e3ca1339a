"""`serve-console stop`: stop a service's running unit (it stops serving), and wait until it has."""

from __future__ import annotations

import argparse
import asyncio

from console.commands.service_actions import add_action_options, target


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "stop",
        help="stop the unit a service runs (an outage until the next switch or start)",
        description="Stop the running layout's unit and wait until it has stopped. Exit 0 stopped or "
        "nothing was running, 1 refused (read-only, a switch holds the lock) or failed, 2 usage.",
    )
    add_action_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    host_cfg, service = target(args, "stop")
    return asyncio.run(_stop(host_cfg, service, args.json))


async def _stop(host_cfg, service, as_json: bool) -> int:
    from console.commands.host_args import print_json
    from console.domain.safe_text import shown
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.switch import NOTHING, STOPPED, stop_service

    host = open_host(host_cfg)
    audit = open_audit()
    try:
        result = await stop_service(host, service, audit=audit)
    finally:
        audit.close()
        await host.close()
    if as_json:
        print_json(result.to_json())
    else:
        print(shown(f"{result.host}/{result.service}: {result.outcome.upper()}: {result.reason}"))
        if result.evidence is not None:
            print(shown(f"  evidence (collected before the stop): {result.evidence}"))
    return 0 if result.outcome in (STOPPED, NOTHING) else 1
