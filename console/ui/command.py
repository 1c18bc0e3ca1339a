"""The `tui` subcommand (the default): `serve-console [--demo] [--readonly] [--theme T]`."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

#: Set to 1 to open the demo without bringing its first layout up (tests start from a bare host).
NO_START_ENV = "SERVE_CONSOLE_DEMO_NO_START"


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tui", help="open the console (the default when no command is given)")
    parser.add_argument("--demo", action="store_true",
                        help="open it on the packaged simulated cluster (stops the units it started on exit)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme from themes/ (dark, light, high-contrast)")
    parser.set_defaults(func=run)


def tui_config(args: argparse.Namespace):
    """The config to open, and notes for the operator (a demo service moved off a busy port).

    Only the packaged demo is ever moved: another demo on this machine may hold its port 30000. A
    user's hosts.toml is used as written.
    """
    from console.config import load_config

    if args.demo:
        from console.sim.demo_cluster import load_demo_config

        return load_demo_config()
    return load_config(args.config), []


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError
    from console.hosts.state_dir import STATE_DIR_ENV
    from console.ui.themes import theme_names

    config, notes = tui_config(args)
    if args.theme and args.theme not in theme_names():
        raise UsageError(f"unknown theme {args.theme!r}; choose from {', '.join(theme_names())}")
    if not config.hosts:
        raise UsageError(f"{config.path}: no hosts configured")
    with contextlib.ExitStack() as stack:
        state_root = None
        if args.demo and not os.environ.get(STATE_DIR_ENV):
            # Like `serve-console demo`: the demo's units and audit live in a temporary state dir.
            state_root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="serve-console-demo-")))
        return _run_app(args, config, state_root, notes)


def _run_app(args: argparse.Namespace, config, state_root: Path | None, notes: list[str]) -> int:
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    hosts = open_hosts(config, state_dir=state_root)
    audit = open_audit(state_root)
    app = ConsoleApp(hosts, config=config, readonly=args.readonly, theme=args.theme, audit=audit,
                     demo_start=args.demo and not args.readonly and os.environ.get(NO_START_ENV) != "1",
                     stop_started_units=args.demo, notices=notes)
    try:
        app.run()
    finally:
        audit.close()
    return app.return_code or 0
