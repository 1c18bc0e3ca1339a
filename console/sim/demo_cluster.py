"""The packaged demo cluster, ready to run on this machine.

The demo's services listen on fixed loopback ports (30000, as SGLang does). Each demo reserves its
ports for as long as it runs, with a lock file per port that every demo on the machine shares: a
port only looks free while a switch has stopped one engine and the next has not bound it yet (SGLang
binds after loading), so a second demo started then would take it and the first one's rollback would
die on `address already in use`. A port another demo reserved, or another program holds, moves the
service to the next one free. Only the packaged demo is ever rewritten, never a user's hosts.toml.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from console.config import ConsoleConfig, HostConfig, ServiceConfig, demo_config_path, load_config, with_nodes

#: Overrides where the per-port lock files live (tests keep theirs apart from a running demo's).
PORT_LOCK_DIR_ENV = "SERVE_CONSOLE_PORT_LOCK_DIR"
#: How many ports after the configured one a moved service tries before asking the OS for any.
NEXT_PORTS = 50

#: Lock files of the ports this process reserved; closing one releases it (so does exiting).
_held: dict[int, int] = {}

#: Says whether a busy configured port is held by the demo's own unit (run from the shared state).
OwnsPort = Callable[[HostConfig, ServiceConfig], bool]


def load_demo_config(owns_busy_port: OwnsPort | None = None) -> tuple[ConsoleConfig, list[str]]:
    """The demo cluster, each service on a port reserved for this process.

    Args:
        owns_busy_port: for a configured port that is busy but not reserved by another demo, whether
            the demo's own engine holds it (one a headless `switch` started from the shared state); such
            a port is kept. Without it, every busy port moves.

    Returns:
        The config, and one line per moved service saying where it went.
    """
    config = load_config(demo_config_path())
    release_demo_ports()  # one demo per process: a second load starts afresh
    notes: list[str] = []
    owns = owns_busy_port or (lambda _h, _s: False)
    hosts = tuple(_with_reserved_ports(host, notes, owns) for host in config.hosts)
    return dataclasses.replace(config, hosts=with_nodes(hosts)), notes  # the nodes see the moved ports


def note_state_root(ports: list[int], state_root: Path) -> None:
    """Write into the lock file of each of `ports` this process reserved who holds it and where its units
    live (`PID STATE_ROOT`), so a console on another state dir is refused the port in one line; a
    console on the same state dir drives the same units, under the same switch locks, and may start it."""
    for port in ports:
        if port in _held:
            with contextlib.suppress(OSError):
                path = _lock_dir() / f"port-{port}.lock"
                path.write_text(f"{os.getpid()} {state_root.resolve()}\n")


def reserved_elsewhere(port: int, state_root: Path) -> str | None:
    """Why a unit under `state_root` may not start on `port`, when a running demo reserved it for units
    under another state dir (its units stopped for a switch, the port looks free while the next one
    loads); else None."""
    if port in _held:
        return None  # this process's own demo
    path = _lock_dir() / f"port-{port}.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # no demo ever reserved it (or another user's file: its engine's bind will say)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # a live demo holds it
            pid, _, root = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip().partition(" ")
            if root and Path(root) == state_root.resolve():
                return None  # the demo's own units, from another console on its state dir
            who = f"the demo running as pid {pid}" if pid.isdigit() else "a running demo"
            where = f", whose units live in {root}" if root else ""
            return f"port {port} is reserved by {who}{where} (not this state dir); stop that demo, or use another port"
        return None
    finally:
        os.close(fd)


def release_demo_ports() -> None:
    """Give back every port this process reserved (a demo that ends; tests between cases)."""
    for fd in _held.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


def _with_reserved_ports(host: HostConfig, notes: list[str], owns: OwnsPort) -> HostConfig:
    services: list[ServiceConfig] = []
    for service in host.services:
        url = urlsplit(service.url)
        address, port = url.hostname or "127.0.0.1", url.port
        if port is None:
            services.append(service)
            continue
        why = _unavailable(address, port, functools.partial(owns, host, service))
        if why is not None:
            free = _reserve_another(address, port)
            service = dataclasses.replace(service, url=urlunsplit(url._replace(netloc=f"{address}:{free}")))
            notes.append(f"{host.name}/{service.name}: port {port} {why}; the demo serves on {free}")
        services.append(_with_cluster_ports(host, service, notes))
    return dataclasses.replace(host, services=tuple(services))


def _with_cluster_ports(host: HostConfig, service: ServiceConfig, notes: list[str]) -> ServiceConfig:
    """A service over several hosts also listens on its rendezvous and RAS ports: reserved as its URL's."""
    cluster = service.cluster
    if cluster is None:
        return service
    ports = {}
    for key in ("dist_port", "ras_port"):
        port = getattr(cluster, key)
        if _unavailable("127.0.0.1", port, lambda: False) is not None:
            ports[key] = _reserve_another("127.0.0.1", port)
            notes.append(f"{host.name}/{service.name}: {key} {port} is taken; the demo uses {ports[key]}")
    return dataclasses.replace(service, cluster=dataclasses.replace(cluster, **ports)) if ports else service


def _unavailable(address: str, port: int, owned: Callable[[], bool]) -> str | None:
    """None once `port` is reserved for this process, else why it cannot be."""
    if port in _held:
        return None
    fd = _lock(port)
    if fd is None:
        return "is another demo's on this machine"
    if _port_busy(address, port) and not owned():
        os.close(fd)
        return "is in use here"
    _held[port] = fd
    return None


def _reserve_another(address: str, port: int) -> int:
    for candidate in range(port + 1, min(port + 1 + NEXT_PORTS, 65536)):
        if candidate not in _held and _unavailable(address, candidate, lambda: False) is None:
            return candidate
    while True:  # every nearby port taken: any free one the OS gives that no other demo reserved
        candidate = _free_port(address)
        if _unavailable(address, candidate, lambda: False) is None:
            return candidate


def _lock_dir() -> Path:
    override = os.environ.get(PORT_LOCK_DIR_ENV)
    path = Path(override) if override else Path(tempfile.gettempdir()) / "serve-console-demo-ports"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # shared by every user's demos, like /tmp itself
            path.chmod(0o1777)
    return path


def _lock(port: int) -> int | None:
    """An open, flock-held lock file for `port`, or None while another process holds it."""
    path = _lock_dir() / f"port-{port}.lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        return None  # another user's file we may not open: theirs
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _port_busy(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, port)) == 0


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])
