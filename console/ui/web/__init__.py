"""The console in a browser: `serve-console web`, textual-serve behind a token, one app per session.

This is the package's public face: other rooms import these names from here, never from its modules.
The CLI's COMMANDS registry names this package for the `web` subcommand.
"""

from console.ui.web.web_entry import add_parser, run

__all__ = ["add_parser", "run"]
