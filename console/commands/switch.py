"""`serve-console switch LAYOUT`: switch a service's layout and report, live, whether it came up."""

from __future__ import annotations

import argparse
import asyncio

from console.commands.host_args import add_host_option, pick_target


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "switch",
        help="switch a service to another layout and watch it come up",
        description="Stop the running layout, start LAYOUT, and watch journal, unit state and health "
        "until it is ready or has failed; roll back to the last ready layout on failure. "
        "LAYOUT already running and ready is left as it is (exit 0) unless --restart. "
        "Exit 0 ready or unchanged, 1 failed/timeout/refused, 2 usage or config error.",
    )
    parser.add_argument("layout", metavar="LAYOUT", help="layout name as in hosts.toml (`EP8`, `TP4EP2`)")
    add_host_option(parser)
    parser.add_argument("--json", action="store_true", help="JSON lines: events, then one result")
    parser.add_argument("--force", action="store_true", help="switch even if the fit predicts oom or invalid")
    parser.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="seconds to wait (default 900)"
    )
    parser.add_argument(
        "--restart", action="store_true", help="restart LAYOUT even when it is already running and ready"
    )
    parser.add_argument("--no-rollback", action="store_true", help="leave a failed layout as it is")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    from console.ops.readonly import ReadOnlyRefused, require_writable

    config, host_cfg, service = pick_target(args, layout=args.layout)
    try:
        require_writable(config, args.readonly, f"switch {host_cfg.name}/{service.name} to {args.layout}")
    except ReadOnlyRefused as exc:
        if args.json:
            from console.commands.switch_output import print_refused

            print_refused(host_cfg.name, service.name, args.layout, str(exc))
        raise
    return asyncio.run(_switch(host_cfg, service, args))


async def _switch(host_cfg, service, args: argparse.Namespace) -> int:
    from console.commands.switch_output import HumanPrinter, JsonPrinter
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.switch import READY, UNCHANGED, resolve, switch_layout

    host = open_host(host_cfg)
    audit = open_audit()
    try:
        service, layout = resolve(host, service, args.layout)  # a bad name is a usage error before anything runs
        printer = JsonPrinter() if args.json else HumanPrinter(host.name, service.name)
        result = await switch_layout(
            host,
            service,
            layout,
            force=args.force,
            timeout_s=args.timeout,
            rollback=not args.no_rollback,
            restart_ready=args.restart,
            audit=audit,
            on_event=printer,
        )
    finally:
        audit.close()
        await host.close()
    return 0 if result.outcome in (READY, UNCHANGED) else 1
