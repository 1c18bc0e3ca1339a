"""The `tui` subcommand (the default): `serve-console [--demo] [--readonly] [--theme T]`."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

#: Set to 1 to open the demo without bringing its first layout up (tests start from a bare host).
NO_START_ENV = "SERVE_CONSOLE_DEMO_NO_START"


#: The streams the TUI reads keys from and draws on (Textual draws on stderr).
STREAMS = (("stdin", lambda: sys.stdin), ("stdout", lambda: sys.stdout), ("stderr", lambda: sys.stderr))


def _isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by something that is no file
        return False


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tui", help="open the console (the default when no command is given)")
    parser.add_argument("--demo", action="store_true",
                        help="open it on the packaged simulated cluster (stops the units it started on exit)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme from themes/ (dark, light, high-contrast)")
    parser.add_argument("--screenshot-dir", metavar="DIR",
                        help="where ctrl+s saves screenshots (default: the current directory)")
    parser.set_defaults(func=run)


def tui_config(args: argparse.Namespace):
    """The config to open, and notes for the operator (a demo service moved off a busy port).

    Only the packaged demo is ever moved: another demo on this machine may hold its port 30000. A
    user's hosts.toml is used as written.
    """
    from console.config import load_config

    if args.demo:
        from console.sim.demo_cluster import load_demo_config

        return load_demo_config(owns_busy_port=_shared_demo_serves)
    return load_config(args.config), []


def _shared_demo_serves(host_cfg, service) -> bool:
    """Whether a unit of `service` runs in the shared demo state (a headless `switch` from the repo)."""
    import asyncio

    from console.factory import open_host
    from console.ops.status import unit_states

    async def check() -> bool:
        host = open_host(host_cfg)
        try:
            return any(s.is_running for s in await unit_states(host, service))
        finally:
            await host.close()

    try:
        return asyncio.run(check())
    except Exception:  # a state dir that cannot be read shares nothing
        return False


def demo_state_root(config, stack: contextlib.ExitStack) -> Path | None:
    """Where a demo keeps its units: None (the user's state dir) for the shared demo, else a temp dir.

    The demo that kept the packaged ports is the one the repo's hosts.toml describes (a host named
    demo on port 30000, in the user's state dir), so `status`, `switch`, `tail` and `stop` from the repo
    reach its units. A demo moved to other ports runs apart, in a state dir of its own.
    """
    from console.config import demo_config_path, load_config
    from console.hosts.state_dir import STATE_DIR_ENV

    if os.environ.get(STATE_DIR_ENV):
        return None
    packaged = {(h.name, s.name): s.url for h in load_config(demo_config_path()).hosts for s in h.services}
    if all(packaged.get((h.name, s.name)) == s.url for h in config.hosts for s in h.services):
        return None
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="serve-console-demo-")))


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError
    from console.ui.themes import theme_names

    config, notes = tui_config(args)
    if args.theme and args.theme not in theme_names():
        raise UsageError(f"unknown theme {args.theme!r}; choose from {', '.join(theme_names())}")
    if not config.hosts:
        raise UsageError(f"{config.path}: no hosts configured")
    not_a_terminal = [name for name, stream in STREAMS if not _isatty(stream())]
    if not_a_terminal:
        names = " and ".join(", ".join(not_a_terminal).rsplit(", ", 1))
        verb = "is" if len(not_a_terminal) == 1 else "are"
        raise UsageError(
            f"the console needs a terminal, and {names} {verb} not one; "
            "without one, use `serve-console status` and `serve-console tail`"
        )
    with contextlib.ExitStack() as stack:
        state_root = demo_state_root(config, stack) if args.demo else None
        return _run_app(args, config, state_root, notes)


def _run_app(args: argparse.Namespace, config, state_root: Path | None, notes: list[str]) -> int:
    from console.factory import open_hosts
    from console.hosts.state_dir import state_dir
    from console.ops.audit import open_audit
    from console.ops.readonly import is_readonly
    from console.shutdown import SHUTDOWN
    from console.ui.app import ConsoleApp

    # With its terminal gone, a shutdown cut short by its deadline says so in the state dir's log.
    with contextlib.suppress(Exception):
        SHUTDOWN.log_path = state_dir() / "shutdown.log"
    hosts = open_hosts(config, state_dir=state_root)
    audit = open_audit(state_root)
    # Read-only (flag or config) plays the demo without starting or stopping anything.
    readonly = is_readonly(config, args.readonly)
    app = ConsoleApp(hosts, config=config, readonly=readonly, theme=args.theme, audit=audit,
                     demo_start=args.demo and not readonly and os.environ.get(NO_START_ENV) != "1", demo=args.demo,
                     stop_started_units=args.demo and not readonly, notices=notes,
                     screenshot_dir=getattr(args, "screenshot_dir", None))
    try:
        app.run()
    finally:
        audit.close()
    return app.return_code or 0
