"""What a host tells about itself as one node of a service over several hosts: the state of a process,
the address it reaches another node from, and a TCP connection as the host itself would open it.

The per-rank health (ops/ranks.py) reads a node's main process state (`T`: stopped, a wedge), maps the
node addresses NCCL RAS names to hosts (`ip -o route get HEAD` says which source address a node uses to
reach the head), and asks RAS, which listens on the host's own `localhost:28028`, through the host's own
connection.
"""

from __future__ import annotations

import asyncio
import re

from console.errors import HostError
from console.hosts.base import Listener, Streams, Transport
from console.hosts.listeners import ss_listener_of
from console.hosts.procfs import (
    listening_inode,
    listening_uid,
    parent_pid,
    port_listener,
    process_state,
    process_uid,
    stat_ppid,
    stat_state,
)
from console.hosts.sockets import open_connection

#: `10.0.0.2 dev eth1 src 10.0.0.1 uid 0` in `ip -o route get`.
_SRC = re.compile(r"\bsrc\s+([0-9A-Fa-f.:]+)")
_QUICK_S = 5.0


def route_source_in(output: str) -> str | None:
    """The `src` address in `ip -o route get` output."""
    match = _SRC.search(output)
    return match[1] if match else None


class TransportNodeFacts:
    """Node facts read over a host's transport: /proc and `ip` by command, TCP through its SSH connection."""

    def __init__(self, transport: Transport, host: str) -> None:
        self.transport = transport
        self.host = host

    async def process_state(self, pid: int) -> str | None:
        result = await self.transport.run(["cat", f"/proc/{int(pid)}/stat"], timeout_s=_QUICK_S)
        return stat_state(result.stdout) if result.ok else None

    async def route_source(self, destination: str) -> str | None:
        result = await self.transport.run(["ip", "-o", "route", "get", destination], timeout_s=_QUICK_S)
        return route_source_in(result.stdout) if result.ok else None

    async def listener(self, address: str, port: int) -> Listener | None:
        result = await self.transport.run(["ss", "-ltnpeH", f"sport = :{int(port)}"], timeout_s=_QUICK_S)
        if not result.ok:
            raise HostError(self.host, f"cannot list the listeners of {self.host} (ss: {result.stderr.strip()[:200]})")
        return ss_listener_of(result.stdout, address)

    async def parent_pid(self, pid: int) -> int | None:
        result = await self.transport.run(["cat", f"/proc/{int(pid)}/stat"], timeout_s=_QUICK_S)
        return stat_ppid(result.stdout) if result.ok else None

    async def process_uid(self, pid: int) -> int | None:
        result = await self.transport.run(["stat", "-c", "%u", f"/proc/{int(pid)}"], timeout_s=_QUICK_S)
        return int(result.stdout.strip()) if result.ok and result.stdout.strip().isdigit() else None

    async def dial(self, address: str, port: int) -> Streams:
        connection = getattr(self.transport, "connection", None)
        try:
            if connection is None:  # a local transport: this machine is the host
                return await asyncio.wait_for(open_connection(address, port), _QUICK_S)
            conn = await connection()
            return await asyncio.wait_for(conn.open_connection(address, port), _QUICK_S)
        except HostError:
            raise
        except Exception as exc:  # OSError, a timeout, asyncssh's ChannelOpenError (no OSError)
            raise HostError(self.host, f"cannot reach {address}:{port} from {self.host}: {exc or type(exc).__name__}") from None


class LocalNodeFacts:
    """Node facts of a simulated host, whose processes and sockets are this machine's.

    Each simulated node has its own loopback address (127.0.0.1 for a head, 127.0.0.R+1 for node-rank R;
    sim/host/units.py starts its engine there), as the source it reaches the others from.
    """

    def __init__(self, host: str, loopback: str = "127.0.0.1") -> None:
        self.host = host
        self.loopback = loopback
        self._listeners: dict[tuple[str, int], tuple[str, Listener]] = {}

    async def process_state(self, pid: int) -> str | None:
        return await asyncio.to_thread(process_state, pid)

    async def route_source(self, destination: str) -> str | None:
        return self.loopback

    async def listener(self, address: str, port: int) -> Listener | None:
        inode = await asyncio.to_thread(listening_inode, port, address)
        if inode is None:
            return None
        cached = self._listeners.get((address, port))
        if cached is not None and cached[0] == inode:  # the same socket: its owner was found already
            return cached[1]
        found = await asyncio.to_thread(port_listener, port, address)  # every process's descriptors
        if found is None:
            return None
        listener = Listener(found[0], found[1], await asyncio.to_thread(listening_uid, port, address))
        self._listeners[(address, port)] = (inode, listener)
        return listener

    async def parent_pid(self, pid: int) -> int | None:
        return await asyncio.to_thread(parent_pid, pid)

    async def process_uid(self, pid: int) -> int | None:
        return await asyncio.to_thread(process_uid, pid)

    async def dial(self, address: str, port: int) -> Streams:
        try:
            return await asyncio.wait_for(open_connection(address, port), _QUICK_S)
        except (OSError, TimeoutError) as exc:
            raise HostError(self.host, f"cannot reach {address}:{port}: {exc or type(exc).__name__}") from None
