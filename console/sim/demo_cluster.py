"""The packaged demo cluster, ready to run on this machine.

The demo's services listen on fixed loopback ports (30000, as SGLang does). When another program (or
another demo) already holds one, the demo moves that service to a free port instead of failing with
`address already in use`. Only the packaged demo is ever rewritten, never a user's hosts.toml.
"""

from __future__ import annotations

import dataclasses
import socket
from urllib.parse import urlsplit, urlunsplit

from console.config import ConsoleConfig, HostConfig, ServiceConfig, demo_config_path, load_config


def load_demo_config() -> tuple[ConsoleConfig, list[str]]:
    """The demo cluster, with every busy service port moved to a free one.

    Returns:
        The config, and one line per moved service saying where it went.
    """
    config = load_config(demo_config_path())
    notes: list[str] = []
    hosts = tuple(_with_free_ports(host, notes) for host in config.hosts)
    return dataclasses.replace(config, hosts=hosts), notes


def _with_free_ports(host: HostConfig, notes: list[str]) -> HostConfig:
    services: list[ServiceConfig] = []
    for service in host.services:
        url = urlsplit(service.url)
        address, port = url.hostname or "127.0.0.1", url.port
        if port is not None and _port_busy(address, port):
            free = _free_port(address)
            netloc = f"{address}:{free}"
            service = dataclasses.replace(service, url=urlunsplit(url._replace(netloc=netloc)))
            notes.append(f"{host.name}/{service.name}: port {port} is in use here; the demo serves on {free}")
        services.append(service)
    return dataclasses.replace(host, services=tuple(services))


def _port_busy(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, port)) == 0


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])
