"""Who listens on a TCP port of a host, in words: `ss -ltnp` over the host's transport.

The service pane and `status` name the process that answers a service's port when none of its units
runs (another program, an engine left over), instead of calling the service ready.
"""

from __future__ import annotations

import re

from console.hosts.base import Listener, Transport

#: `users:(("python3",pid=4242,fd=7))` in a line of `ss -p`.
_USER = re.compile(r'\("([^"]*)",pid=(\d+)')
#: `uid:1000` in a line of `ss -e` (left out for root's sockets).
_UID = re.compile(r"\buid:(\d+)")


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


def ss_listener_of(output: str, address: str | None = None) -> Listener | None:
    """The listener in `ss -ltnpeH 'sport = :PORT'` output (for connections to `address`, if given: bound
    to it or to any address): its pid and program where `ss` shows them to this user, and the socket's
    owner (`uid:N`; none shown beside an inode is root's); None when nothing listens."""
    lines = [line for line in output.splitlines() if line.strip() and _accepts(line, address)]
    if not lines:
        return None
    user, uid = _USER.search(lines[0]), _UID.search(lines[0])
    owner = int(uid[1]) if uid else 0 if " ino:" in lines[0] else None
    return Listener(int(user[2]) if user else None, user[1] if user else "", owner)


def _accepts(line: str, address: str | None) -> bool:
    """The ss line's local address (its 4th column) takes connections to `address`."""
    if address is None:
        return True
    columns = line.split()
    local = columns[3].rpartition(":")[0] if len(columns) > 3 else ""
    return local.strip("[]") in (address, "*", "0.0.0.0", "::", f"::ffff:{address}")
