"""The `serve-console` command: the TUI by default, headless subcommands for scripts.

Exit codes: 0 ok, 1 failed (a switch failed, triage found something, a host refused), 2 usage or
config error. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from console import __version__
from console.domain.safe_text import printable
from console.errors import ConsoleError
from console.shutdown import SHUTDOWN

#: Subcommand name -> module defining `add_parser(subparsers)`, which sets `func=run` where
#: `run(args) -> int`. Imported by name so that only `console.ui` ever imports textual.
COMMANDS = {
    "tui": "console.ui.tui_entry",
    "status": "console.commands.status",
    "switch": "console.commands.switch",
    "tail": "console.commands.tail",
    "history": "console.commands.history",
    "demo": "console.commands.demo",
    "fit": "console.commands.fit",
    "predict": "console.commands.predict",
    "triage": "console.commands.triage",
    "replay": "console.commands.replay",
    "stop": "console.commands.stop",
    "restart": "console.commands.restart",
    "fleet": "console.commands.fleet",
    "probe": "console.commands.probe",
    "results": "console.commands.results",
    "explore": "console.commands.explore",
    "watch": "console.commands.watch",
    "alerts": "console.commands.alerts",
    "web": "console.ui.web",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every usage error
        self.exit(2, f"serve-console: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="serve-console", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"serve-console {__version__}")
    _add_global_options(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).add_parser(sub)
    for subparser in sub.choices.values():
        # Also after the subcommand; SUPPRESS keeps a value given before it from being reset.
        _add_global_options(subparser, default=argparse.SUPPRESS)
    return parser


#: Options every command takes, before or after the subcommand's name.
GLOBAL_FLAGS = ("--readonly",)
GLOBAL_VALUED = ("--config",)


def _add_global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    known = parser._option_string_actions
    if "--config" not in known:
        parser.add_argument(
            "--config",
            metavar="PATH",
            default=default,
            help="hosts.toml to use (default: ./hosts.toml, then the user config dir)",
        )
    if "--readonly" not in known:
        parser.add_argument(
            "--readonly",
            action="store_true",
            default=False if default is None else default,
            help="refuse every action that changes a host",
        )


#: Signals that end a command the way Ctrl-C does: `kill`, `timeout`, a closed terminal, a dropped SSH session.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


#: Commands whose shutdown has a deadline (console/shutdown.py): what holds a terminal, a browser's session or
#: a systemd stop. A headless switch or explore ends its own way, however long a ready layout takes to load.
BOUNDED_SHUTDOWN = frozenset({"tui", "web", "watch", "demo"})


def interrupt_on_termination(*, deadline: bool = False) -> None:
    """Handle SIGTERM and SIGHUP as SIGINT is handled, so that a switch, an explore, the demo and the
    benchmarks end the orderly way (a ready layout left running, the demo's units stopped) instead of
    dying mid-way, within the shutdown's deadline (console/shutdown.py). A signal set to be ignored
    (`nohup`) stays ignored; the TUI installs its own."""
    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _as_interrupt_within_deadline if deadline else _as_interrupt)


def _as_interrupt_within_deadline(signum: int, frame: FrameType | None) -> None:
    # The first starts the shutdown's deadline; a second one during the shutdown exits at once.
    SHUTDOWN.signalled(signal.Signals(signum).name)
    _as_interrupt(signum, frame)


def _as_interrupt(_signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):  # asyncio.run's (it cancels the main task), else Python's KeyboardInterrupt
        handler(signal.SIGINT, frame)
    else:  # SIGINT ignored (a background job of a script): end all the same, through KeyboardInterrupt
        raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(with_default_command(args_list))
    if argv is None:  # the process's own command line: the process is ours to set up (tests pass argv)
        interrupt_on_termination(deadline=args.command in BOUNDED_SHUTDOWN)
    try:
        return int(args.func(args) or 0)
    except ConsoleError as exc:  # its text may quote a host (an error it answered): made printable
        print(f"serve-console: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # our own stdout closed (`| head`): not an error of any host
        _quiet_stdout()
        return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not complain about the pipe."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def with_default_command(args_list: list[str]) -> list[str]:
    """No subcommand means the TUI: `tui` goes first, and every option (global or the TUI's) after it."""
    if _subcommand(args_list) is None and not ({"-h", "--help", "--version"} & set(args_list)):
        return ["tui", *args_list]
    return list(args_list)


def _subcommand(args_list: list[str]) -> str | None:
    """The subcommand named in the arguments (skipping the values of global options), or None."""
    skip = False
    for arg in args_list:
        if skip:
            skip = False
        elif arg in GLOBAL_VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None
