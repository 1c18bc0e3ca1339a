"""What `serve-console stop` and `serve-console restart` share: options, the read-only guard, the host."""

from __future__ import annotations

import argparse

from console.commands.host_args import add_host_option, pick_target


def add_action_options(parser: argparse.ArgumentParser) -> None:
    add_host_option(parser)
    parser.add_argument("--json", action="store_true", help="JSON lines: events, then one result")


def target(args: argparse.Namespace, verb: str):
    """(host config, service) the command acts on, after the read-only guard has let it through.

    Raises:
        ReadOnlyRefused: the console is read-only (config or --readonly).
        UsageError: no such host or service.
    """
    from console.ops.readonly import ReadOnlyRefused, require_writable

    config, host_cfg, service = pick_target(args)
    try:
        require_writable(config, getattr(args, "readonly", False), f"{verb} {host_cfg.name}/{service.name}")
    except ReadOnlyRefused as exc:
        if args.json:  # the result line a --json reader waits for, besides the one line on stderr
            from console.commands.switch_output import print_refused

            print_refused(host_cfg.name, service.name, "-", str(exc))
        raise
    return host_cfg, service
