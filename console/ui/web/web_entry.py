"""`serve-console web`: the console in a browser, one app process per browser session, read-only by default.

    serve-console web [--bind 127.0.0.1] [--port 8765] [--allow-actions] [--token-file F] [--insecure-bind]
                      [--max-sessions 4] [--idle-minutes 30] [--demo] [--theme T]

The security model is in docs/web.md: loopback by default, reached through `ssh -L`; a token printed at
start (or read from a private file) exchanged for a cookie; every session a row in the state file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import socket
import sys
from pathlib import Path

DEFAULT_PORT = 8765
DEFAULT_MAX_SESSIONS = 4
DEFAULT_IDLE_MINUTES = 30.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "web", help="serve the console to browsers: one app per session, read-only unless --allow-actions",
        description="Serves the console through textual-serve. Loopback only by default: reach it with "
                    "`ssh -L 8765:127.0.0.1:8765 HOST` and open the URL it prints (docs/web.md).")
    parser.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on (default 127.0.0.1; another needs --token-file or --insecure-bind)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 takes a free one)")
    parser.add_argument("--allow-actions", action="store_true",
                        help="let visitors switch, stop, restart, probe and explore (read-only otherwise)")
    parser.add_argument("--token-file", metavar="F",
                        help="read the access token from F (mode 0600, yours) instead of printing a new one")
    parser.add_argument("--insecure-bind", action="store_true",
                        help="allow a non-loopback --bind with the printed token (sent over plain HTTP)")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, metavar="N",
                        help=f"browser sessions open at once, each an app process (default {DEFAULT_MAX_SESSIONS})")
    parser.add_argument("--idle-minutes", type=float, default=DEFAULT_IDLE_MINUTES, metavar="M",
                        help=f"end a session after M minutes without input (default {DEFAULT_IDLE_MINUTES:g})")
    parser.add_argument("--demo", action="store_true",
                        help="serve the packaged simulated cluster: the server runs it, every visitor watches it")
    parser.add_argument("--theme", metavar="NAME", help="colour theme visitors start with")
    parser.set_defaults(func=run)


def check_options(args: argparse.Namespace) -> None:
    """Refuse options that cannot work, before anything starts.

    Raises:
        UsageError: one line naming the option.
    """
    from console.errors import UsageError
    from console.ui.web.access import is_loopback

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0-65535")
    if args.max_sessions < 1:
        raise UsageError(f"--max-sessions {args.max_sessions}: at least 1")
    if not (math.isfinite(args.idle_minutes) and args.idle_minutes > 0):
        raise UsageError(f"--idle-minutes {args.idle_minutes:g}: a number of minutes above 0")
    if not is_loopback(args.bind) and not (args.token_file or args.insecure_bind):
        raise UsageError(f"--bind {args.bind} reaches other machines over plain HTTP: give --token-file F "
                         "(a token you control) or --insecure-bind, or keep 127.0.0.1 and use ssh -L (docs/web.md)")


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError
    from console.ops.readonly import is_readonly, require_writable
    from console.ui.themes import theme_names
    from console.ui.tui_entry import tui_config
    from console.ui.web.access import new_token, read_token_file

    check_options(args)
    token = read_token_file(args.token_file) if args.token_file else new_token()
    if args.theme and args.theme not in theme_names():
        raise UsageError(f"unknown theme {args.theme!r}; choose from {', '.join(theme_names())}")
    config, notes = tui_config(args)  # --demo: the demo's ports, reserved for this process
    if not config.hosts:
        raise UsageError(f"{config.path}: no hosts configured")
    if args.allow_actions:
        require_writable(config, args.readonly, "let web visitors change hosts (--allow-actions)")
    for note in notes:
        print(f"serve-console web: demo: {note}", file=sys.stderr)
    with contextlib.ExitStack() as stack:
        return _serve(args, config, token, readonly=not args.allow_actions,
                      server_readonly=is_readonly(config, args.readonly), stack=stack)


def _serve(args: argparse.Namespace, config, token: str, *, readonly: bool, server_readonly: bool,
           stack: contextlib.ExitStack) -> int:
    from console.errors import ConsoleError
    from console.hosts.state_dir import STATE_DIR_ENV, state_dir
    from console.ops.session_log import open_web_sessions
    from console.shutdown import SHUTDOWN
    from console.ui.tui_entry import demo_state_root
    from console.ui.web.access import AccessGate, is_loopback
    from console.ui.web.demo_owner import DemoOwner
    from console.ui.web.server import ConsoleWebServer, WebLimits, serve
    from console.ui.web.visitor import SERVER_PID_ENV, visitor_argv

    env = {SERVER_PID_ENV: str(os.getpid())}
    owner = None
    if args.demo:
        state_root = demo_state_root(config, stack) or state_dir()
        env[STATE_DIR_ENV] = str(state_root)
        owner = DemoOwner(config, state_root, start_first=not server_readonly, say=_say)
    config_path = None if args.demo else str(Path(config.path).resolve())
    argv = visitor_argv(config_path=config_path, demo_urls=owner.visitor_urls() if owner else [],
                        readonly=readonly, theme=args.theme)
    log = open_web_sessions()
    stack.callback(log.close)
    limits = WebLimits(max_sessions=args.max_sessions, idle_s=args.idle_minutes * 60, readonly=readonly)
    server = ConsoleWebServer(argv, env, gate=AccessGate(token), limits=limits, log=log, say=_say)
    if not is_loopback(args.bind):
        print(f"serve-console web: warning: --bind {args.bind} serves the console to other machines over plain "
              "HTTP; the token and the session cookie cross the network unencrypted (prefer 127.0.0.1 and "
              "ssh -L, docs/web.md)", file=sys.stderr, flush=True)

    def listening(port: int) -> None:
        _banner(args, port, token=None if args.token_file else token, limits=limits)

    async def main() -> None:
        try:
            await serve(server, args.bind, args.port, listening, owner.bring_up if owner else None)
        finally:
            if owner is not None:
                with SHUTDOWN.stopping("the web demo's units"):
                    await owner.close()

    try:
        asyncio.run(main())
    except OSError as exc:
        raise ConsoleError(f"cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}; "
                           "choose another --port or --bind") from None
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _banner(args: argparse.Namespace, port: int, *, token: str | None, limits) -> None:
    """Where to point a browser: the URL with the token (or where the token is), and the ssh -L line."""
    host = args.bind
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    mode = "read-only" if limits.readonly else "with actions allowed"
    _say(f"serve-console web: serving the console ({mode}) on http://{host}:{port}/ "
         f"(at most {limits.max_sessions} sessions; one idle for {limits.idle_s / 60:g} min ends)")
    shown_token = token if token is not None else f"<the token in {args.token_file}>"
    _say(f"open: http://{host}:{port}/?token={shown_token}")
    _say(f"from another machine: ssh -L {port}:127.0.0.1:{port} {socket.gethostname()}, then open the URL "
         "there (docs/web.md)")
