"""A browser session's app process: `python -m console.ui.web.visitor`, started by the web server.

It is the console's app, as `serve-console` opens it, on the web driver textual-serve sets in its
environment. It differs from the `tui` command in two ways: it needs no terminal (its screen is the
browser), and on the demo it attaches to the server's cluster (the ports and state dir the server
owns) instead of starting one. It ends with the server, even one that was killed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import os
import signal
import sys
from collections.abc import Sequence

#: The web server's pid: a visitor whose parent is gone (killed before it could say so) ends at once.
SERVER_PID_ENV = "SERVE_CONSOLE_WEB_SERVER_PID"
PR_SET_PDEATHSIG = 1


def visitor_argv(*, config_path: str | None, demo_urls: Sequence[str], readonly: bool,
                 theme: str | None) -> list[str]:
    """The command of one visitor's app process.

    Args:
        config_path: the operator's hosts.toml (None on the demo).
        demo_urls: on the demo, `HOST/SERVICE=URL` of the server's cluster (its reserved ports).
        readonly: the visitor's app hides and refuses every action that changes a host.
        theme: the theme to open with.
    """
    argv = [sys.executable, "-m", "console.ui.web.visitor"]
    argv += ["--config", config_path] if config_path is not None else ["--demo"]
    for url in demo_urls:
        argv += ["--url", url]
    if readonly:
        argv.append("--readonly")
    if theme:
        argv += ["--theme", theme]
    return argv


def _end_with_server() -> None:
    """Have the kernel send SIGTERM when the server dies (the web driver quits on it, as on Ctrl-C)."""
    parent = os.environ.get(SERVER_PID_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if str(os.getppid()) != parent:  # the server died before the line above
        sys.exit(0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="serve-console-web-visitor")
    parser.add_argument("--config", metavar="PATH")
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--url", action="append", default=[], metavar="HOST/SERVICE=URL")
    parser.add_argument("--readonly", action="store_true")
    parser.add_argument("--theme", metavar="NAME")
    return parser


def _config(args: argparse.Namespace):
    from console.config import demo_config_path, load_config

    if not args.demo:
        return load_config(args.config)
    config = load_config(demo_config_path())
    urls = dict(u.split("=", 1) for u in args.url)

    def moved(host):
        services = tuple(dataclasses.replace(s, url=urls.get(f"{host.name}/{s.name}", s.url)) for s in host.services)
        return dataclasses.replace(host, services=services)

    return dataclasses.replace(config, hosts=tuple(moved(h) for h in config.hosts))


def run(args: argparse.Namespace) -> int:
    """Open the console on the config (the state dir comes from the environment the server set)."""
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    config = _config(args)
    audit = open_audit()
    try:
        app = ConsoleApp(open_hosts(config), config=config, readonly=args.readonly, theme=args.theme,
                         audit=audit, demo=args.demo)
        app.run()
        return app.return_code or 0
    finally:
        audit.close()


def main(argv: Sequence[str] | None = None) -> int:
    from console.domain.safe_text import printable
    from console.errors import ConsoleError

    _end_with_server()
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except ConsoleError as exc:  # the server shows the app's stderr: one line, as every command's error
        print(f"serve-console web: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
