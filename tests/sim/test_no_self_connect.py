"""The console's own clients never connect to themselves (issue 30, E28b).

A client dialling a loopback port nothing listens on yet (the console's `/health` polling of an engine
that is starting, RAS on a head) is sooner or later given that port as its own source port by the
kernel and connects to itself (TCP simultaneous open); the engine then cannot bind its port
(`address already in use`). The tests make the kernel's unlucky draw happen at once: a socket left for
the kernel to bind at connect time is bound to the destination's own address and port, as the kernel
would; a client that binds its own source port first is left alone.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from sim_fixtures import free_port

from console.domain.values import Engine
from console.hosts.endpoints import HttpHealthProbe
from console.hosts.node_facts import LocalNodeFacts


@pytest.fixture
async def unlucky_kernel(monkeypatch):
    """The running loop's connects, each unbound socket given the destination's port as its source;
    yields the (source, peer) of every connection that was made to itself."""
    loop = asyncio.get_running_loop()
    real = loop.sock_connect
    selves: list[tuple] = []

    async def sock_connect(sock: socket.socket, address) -> None:
        if sock.getsockname()[1] == 0:  # the kernel picks the source port at connect: it picks the worst
            sock.bind((address[0], address[1]))
        await real(sock, address)
        if sock.getsockname() == sock.getpeername():
            selves.append((sock.getsockname(), sock.getpeername()))

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    return selves


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def test_the_health_probe_never_takes_the_port_of_an_engine_that_is_starting(unlucky_kernel) -> None:
    port = free_port()  # nothing listens: the engine is still loading
    probe = HttpHealthProbe(f"http://127.0.0.1:{port}", Engine.SGLANG, timeout_s=5.0)
    try:
        sample = await probe.probe()
    finally:
        await probe.close()
    assert unlucky_kernel == []
    assert sample.status == "down" and "refused" in (sample.error or ""), sample
    assert _bindable(port)  # the engine can still bind it: no self-connection, no TIME-WAIT left on it


async def test_a_dial_to_a_heads_port_never_connects_to_itself(unlucky_kernel) -> None:
    port = free_port()
    with pytest.raises(Exception, match="cannot reach"):
        await LocalNodeFacts("demo-a").dial("127.0.0.1", port)
    assert unlucky_kernel == []
    assert _bindable(port)


async def test_a_loopback_client_socket_is_bound_apart_from_its_destination() -> None:
    from console.hosts.sockets import client_socket

    port = free_port()
    sock = client_socket(socket.AF_INET, socket.SOCK_STREAM, 0, ("127.0.0.1", port))
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] not in (0, port)
    finally:
        sock.close()
    remote = client_socket(socket.AF_INET, socket.SOCK_STREAM, 0, ("192.0.2.1", port))
    try:
        assert remote.getsockname()[1] == 0  # another machine's port: the kernel's choice is harmless
    finally:
        remote.close()
