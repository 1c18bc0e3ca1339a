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
    from console.ops.guard import require_writable

    config, host_cfg, service = pick_target(args)
    require_writable(config, getattr(args, "readonly", False), f"{verb} {host_cfg.name}/{service.name}")
    return host_cfg, service
