"""The ports a simulated host's units serve on: the URL each unit was started with, and who else holds one.

The demo moves to a free port when its own is taken (another demo, another program), while the repo's
hosts.toml still says the packaged one. Each unit's dir records the URL it was started with, and a
console opened on the same state dir takes it (`serving_urls`), so `status`, `switch`, `tail` and
`stop` reach the engine where it serves. A start whose port another program holds is refused in one
line (`port_taken_by`) instead of dying on `address already in use` and rolling back onto it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Collection
from pathlib import Path

from console.config import HostConfig, ServiceConfig
from console.domain.safe_text import printable
from console.hosts.procfs import group_alive, port_listener
from console.hosts.state_dir import sim_host_dir
from console.sim.host.units import service_port
from console.sim.systemd import read_state, unit_state_from

#: In a unit's dir: the service URL the unit was last started with.
URL_FILE = "url"


def record_url(unit_dir: Path, url: str) -> None:
    """Note the URL a unit is started with (its engine's port)."""
    (unit_dir / URL_FILE).write_text(url + "\n")


def serving_urls(cfg: HostConfig, state_root: Path) -> HostConfig:
    """`cfg`, each service's url replaced by the one its running unit was started with."""
    units_dir = sim_host_dir(state_root, cfg.name) / "units"
    services = []
    for service in cfg.services:
        url = service.url
        for unit in service.all_units():
            raw = read_state(units_dir / unit) if (units_dir / unit).is_dir() else None
            if raw is not None and unit_state_from(unit, raw).is_running:
                with contextlib.suppress(OSError):
                    url = (units_dir / unit / URL_FILE).read_text().strip() or url
                break
        services.append(service if url == service.url else dataclasses.replace(service, url=url))
    return dataclasses.replace(cfg, services=tuple(services))


def port_taken_by(service: ServiceConfig, own_groups: Collection[int], port: int | None = None) -> str | None:
    """Why the unit's port (the service's by default) cannot be bound, in words, when a program other
    than the host's own units (process groups `own_groups`) listens on it; else None."""
    port = port or service_port(service)
    found = port_listener(port)
    if found is None:
        return None
    pid, command = found
    with contextlib.suppress(OSError):
        if pid is not None and os.getpgid(pid) in own_groups and group_alive(os.getpgid(pid)):
            return None  # an engine of this host: its own start fails on the port, as a real one would
    return (f"port {port} of {service.url} is taken by {_words(pid, command)}, not by a unit of this host; "
            "stop it, or give the service another url")


def port_holder_words(port: int) -> str | None:
    """Who listens on `port` of this machine, in words, or None."""
    found = port_listener(port)
    return None if found is None else _words(*found)


def _words(pid: int | None, command: str) -> str:
    """A process in words, its command line (any text) made printable."""
    return f"pid {pid} ({printable(command[:80])})" if pid is not None else "another user's process"
