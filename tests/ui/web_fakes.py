"""A web server with a stand-in app, for the tests of access and limits that need no browser.

The stand-in speaks textual-serve's side of the protocol and nothing else: it says it is a Textual app,
waits for the quit packet, and says it exits. Every real app process costs seconds; these cost none.
"""

from __future__ import annotations

import sys
from pathlib import Path

from console.ops.session_log import WebSessionLog
from console.ui.web.access import AccessGate
from console.ui.web.server import ConsoleWebServer, WebLimits

TOKEN = "a-test-token-of-more-than-24-characters"

STAND_IN_APP = r"""
import os
os.write(1, b"__GANGLION__\n")
while True:
    data = os.read(0, 65536)
    if not data or b'"quit"' in data:
        break
exit_packet = b'{"type": "exit"}'
os.write(1, b"M" + len(exit_packet).to_bytes(4, "big") + exit_packet)
"""


def stand_in_server(state: Path, *, max_sessions: int = 4, idle_s: float = 60.0) -> ConsoleWebServer:
    """A server whose sessions run the stand-in app, logging to `state`/audit.sqlite3."""
    limits = WebLimits(max_sessions=max_sessions, idle_s=idle_s, readonly=True)
    return ConsoleWebServer([sys.executable, "-c", STAND_IN_APP], {}, gate=AccessGate(TOKEN), limits=limits,
                            log=WebSessionLog(state / "audit.sqlite3"), say=lambda _line: None)
