"""health_via = "ssh": the probe reaches an engine bound to the host's localhost through a port
forward on the host's connection, and the forward is rebuilt after a reconnect."""

from __future__ import annotations

import pytest
from aiohttp import web
from http_stub import http_stub
from ssh_fake_server import start_fake_sshd

from console.domain.values import Engine
from console.hosts.endpoints.health import HttpHealthProbe
from console.hosts.ssh.forward import SshPortForward
from console.hosts.ssh.transport import SshTransport


@pytest.fixture
async def engine():
    async def health(request):
        return web.Response(status=200)

    async with http_stub({"/health": health, "/v1/models": health}) as port:
        yield port


async def test_probe_through_the_forward_survives_a_reconnect(tmp_path, engine):
    sshd = await start_fake_sshd(tmp_path)
    transport = SshTransport(sshd.host_config(), backoff_base_s=0.05, backoff_max_s=0.2)
    forward = SshPortForward(transport, "127.0.0.1", engine)
    probe = HttpHealthProbe(f"http://127.0.0.1:{engine}", Engine.SGLANG, forward=forward)
    try:
        first = await probe.probe()
        assert first.status == "ready"
        assert ["direct-tcpip", "127.0.0.1", str(engine)] in sshd.commands
        port_before = await forward.local_port()
        sshd.drop_all()
        await transport.run(["echo-argv"])  # waits for the reconnect
        again = await probe.probe()
        assert again.status == "ready"
        assert transport.link.reconnects == 1 and await forward.local_port() != 0
        assert port_before > 0
    finally:
        await probe.close()
        await forward.close()
        await transport.close()
        await sshd.stop()
