"""An SSH host's health is probed on the host, through its connection (issue 10, item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from sim_fixtures import free_port

from console.config import HostConfig, ServiceConfig, parse_config
from console.domain.values import Engine
from console.errors import ConfigError
from console.hosts.remote import build_remote_host
from console.hosts.ssh.forward import SshPortForward

SSH_SERVICE = """
[hosts.gpu1]
address = "gpu1.example"
[hosts.gpu1.services.k26]
engine = "sglang"
url = "{url}"
template = "sglang@.service"
layouts = ["TP8"]
{extra}
"""


def _load(url: str, extra: str = ""):
    return parse_config(SSH_SERVICE.format(url=url, extra=extra).encode(), "hosts.toml", base_dir=Path("."))


def test_an_ssh_hosts_health_goes_through_ssh_by_default():
    assert _load("http://127.0.0.1:30000").hosts[0].services[0].health_via == "ssh"
    assert _load("http://gpu1.example:30000").hosts[0].services[0].health_via == "ssh"
    assert _load("http://gpu1.example:30000", 'health_via = "direct"').hosts[0].services[0].health_via == "direct"


@pytest.mark.parametrize("url", ["http://127.0.0.1:30000", "http://localhost:30000", "http://[::1]:30000"])
def test_a_loopback_url_probed_directly_from_here_is_refused_at_load(url):
    with pytest.raises(ConfigError) as caught:
        _load(url, 'health_via = "direct"')
    assert str(caught.value).startswith("hosts.toml:") and "loopback" in str(caught.value)


@pytest.fixture
async def local_health_200():
    """Something on this machine's loopback that answers /health with 200 (not the GPU host's engine)."""
    app = web.Application()
    app.router.add_get("/health", lambda request: web.Response(text="ok"))
    app.router.add_get("/v1/models", lambda request: web.json_response({"data": []}))
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield port
    await runner.cleanup()


async def test_an_unreachable_ssh_host_is_never_ready_because_this_machine_answers(local_health_200):
    service = ServiceConfig(name="k26", engine=Engine.SGLANG, url=f"http://127.0.0.1:{local_health_200}",
                            template="sglang@.service", health_via="direct")  # fmt: skip
    dead_port = free_port()  # nothing listens: the SSH host is unreachable
    cfg = HostConfig(name="gpu1", address="127.0.0.1", port=dead_port, connect_timeout_s=1.0, services=(service,))
    host = build_remote_host(cfg)
    try:
        probe = host.probes["k26"]
        assert isinstance(probe.forward, SshPortForward)  # a loopback URL goes through the connection
        sample = await probe.probe()
        assert sample.status == "down" and sample.http_status is None
    finally:
        await host.close()
