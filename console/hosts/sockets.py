"""Client sockets that can never connect to themselves.

A client that keeps dialling a loopback port nothing listens on yet (the console polling `/health` of an
engine that is starting, or RAS on a head) is sooner or later given that same port as its own source
port by the kernel, and connects to itself (TCP simultaneous open): the engine then cannot bind its
port (`[Errno 98] address already in use`, and a TIME-WAIT socket after). Only ports inside the
ephemeral range are exposed, but the console cannot choose its engines' ports. So a socket for a
loopback destination is bound first, to a source port the kernel picks that is not the destination's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

#: How often a bind that drew the destination's own port is tried again (each draw is the kernel's).
_TRIES = 16


def _loopback(sockaddr: tuple[Any, ...]) -> bool:
    try:
        return ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def client_socket(family: int, type_: int, proto: int, sockaddr: tuple[Any, ...]) -> socket.socket:
    """A socket to connect to `sockaddr`; for a loopback one, bound already to another source port."""
    for _ in range(_TRIES):
        sock = socket.socket(family, type_, proto)
        if not _loopback(sockaddr):
            return sock
        try:
            sock.bind((sockaddr[0], 0, *sockaddr[2:]) if family == socket.AF_INET6 else (sockaddr[0], 0))
        except OSError:
            sock.close()
            raise
        if sock.getsockname()[1] != sockaddr[1]:
            return sock
        sock.close()  # the kernel drew the destination's own port: it would be a self-connection
    raise OSError(f"no source port other than {sockaddr[1]} to reach {sockaddr[0]}:{sockaddr[1]} from")


def socket_factory(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's `TCPConnector(socket_factory=...)`: `addr_info` is (family, type, proto, canonname, sockaddr)."""
    family, type_, proto, _, sockaddr = addr_info
    return client_socket(family, type_, proto, sockaddr)


async def open_connection(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """`asyncio.open_connection(address, port)` through `client_socket`: never a self-connection."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    error: OSError | None = None
    for family, type_, proto, _, sockaddr in infos:
        sock = client_socket(family, type_, proto, sockaddr)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, sockaddr)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)
    raise error or OSError(f"{address}:{port} resolves to nothing")
