"""A local TCP port that reaches a port on an SSH host, over the host's one shared connection.

Used for `health_via = "ssh"`: the engine binds to the host's localhost, the probe runs here.
"""

from __future__ import annotations

import asyncio

import asyncssh

from console.errors import HostError
from console.hosts.ssh.transport import SshTransport, describe_error


class SshPortForward:
    """A local port forwarded to `remote_host:remote_port` on the host, over its shared connection.

    Rebuilt transparently after a reconnect (a listener dies with the connection it belongs to).
    """

    def __init__(self, transport: SshTransport, remote_host: str, remote_port: int) -> None:
        self.transport = transport
        self.remote_host = remote_host
        self.remote_port = remote_port
        self._listener: asyncssh.SSHListener | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()

    async def local_port(self) -> int:
        """The local port that currently reaches the remote one.

        Raises:
            HostError: the host is down or refused the forward.
        """
        async with self._lock:
            conn = await self.transport.connection()
            if self._listener is None or self._conn is not conn:
                if self._listener is not None:
                    self._listener.close()
                try:
                    self._listener = await conn.forward_local_port(
                        "127.0.0.1", 0, self.remote_host, self.remote_port
                    )
                except (OSError, asyncssh.Error) as exc:
                    self._listener = None
                    raise HostError(
                        self.transport.name,
                        f"cannot forward a local port to {self.remote_host}:{self.remote_port}: {describe_error(exc)}",
                    ) from None
                self._conn = conn
            return self._listener.get_port()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
