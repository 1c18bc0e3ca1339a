"""Who listens on a TCP port of a host, in words: `ss -ltnp` over the host's transport.

The service pane and `status` name the process that answers a service's port when none of its units
runs (another program, an engine left over), instead of calling the service ready.
"""

from __future__ import annotations

import re

from console.hosts.base import Transport

#: `users:(("python3",pid=4242,fd=7))` in a line of `ss -p`.
_USER = re.compile(r'\("([^"]*)",pid=(\d+)')


def ss_listener(output: str) -> str | None:
    """The listener in `ss -ltnpH 'sport = :PORT'` output, in words; None when nothing listens."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    user = _USER.search(lines[0])
    if user is None:  # ss shows another user's process only to root
        return "a process ss does not name to this user"
    return f"pid {user[2]} ({user[1]})"


async def ss_port_holder(transport: Transport, port: int) -> str | None:
    """Who listens on `port` of the transport's machine; None when nothing does or `ss` cannot say."""
    result = await transport.run(["ss", "-ltnpH", f"sport = :{port}"], timeout_s=5.0)
    return ss_listener(result.stdout) if result.ok else None
