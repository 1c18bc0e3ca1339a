"""The `serve-console` command: the TUI by default, headless subcommands for scripts.

Exit codes: 0 ok, 1 failed (a switch failed, triage found something, a host refused), 2 usage or
config error. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from console import __version__
from console.errors import ConsoleError

#: Subcommand name -> module defining `add_parser(subparsers)`, which sets `func=run` where
#: `run(args) -> int`. Imported by name so that only `console.ui` ever imports textual.
COMMANDS = {
    "tui": "console.ui.command",
    "status": "console.commands.status",
    "switch": "console.commands.switch",
    "tail": "console.commands.tail",
    "history": "console.commands.history",
    "demo": "console.commands.demo",
    "fit": "console.commands.fit",
    "triage": "console.commands.triage",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every usage error
        self.exit(2, f"serve-console: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="serve-console", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"serve-console {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="hosts.toml to use (default: ./hosts.toml, then the user config dir)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # No subcommand means the TUI; top-level TUI flags (--demo, --readonly) go with it.
    if not any(a in COMMANDS for a in args_list if not a.startswith("-")) and not (
        {"-h", "--help", "--version"} & set(args_list)
    ):
        args_list = _insert_default(args_list)
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except ConsoleError as exc:
        print(f"serve-console: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _insert_default(args_list: list[str]) -> list[str]:
    """Put `tui` after the global options so `serve-console --config X --demo` works."""
    out = list(args_list)
    i = 0
    while i < len(out) and out[i] == "--config":
        i += 2
    while i < len(out) and out[i].startswith("--config="):
        i += 1
    out.insert(i, "tui")
    return out
