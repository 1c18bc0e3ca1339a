"""The seams between the ops/UI layers and machines: one protocol per kind of thing a host does.

Real hosts (ssh/local + systemd + nvidia-smi/NVML) and simulated hosts (process manager + ledger)
implement the same protocols, so the switch, the CLI and the TUI never know which they talk to.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from console.config import HostConfig
from console.domain.values import (
    CommandResult,
    GpuSnapshot,
    HealthSample,
    JournalEntry,
    UnitState,
)
from console.hosts.journal_hub import JournalHub

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass(frozen=True, slots=True)
class Listener:
    """The process that listens on a TCP port of a host, as far as the host shows it."""

    pid: int | None
    """None when the host does not show the owner to the console's user (another user's process)."""
    command: str
    uid: int | None
    """The socket's owner (from the kernel's socket table), None when it cannot be read."""


class NodeFacts(Protocol):
    """What a host tells about itself as one node of a service over several hosts (node_facts.py)."""

    async def process_state(self, pid: int) -> str | None:
        """The state letter of a process of the host (`R`, `S`, `T`, `Z`), None when it is gone."""
        ...

    async def route_source(self, destination: str) -> str | None:
        """The address the host sends from to reach `destination`, None when it cannot say."""
        ...

    async def listener(self, address: str, port: int) -> Listener | None:
        """Who listens on TCP `port` of the host for connections to `address`, None when nothing does."""
        ...

    async def parent_pid(self, pid: int) -> int | None:
        """The parent of a process of the host, None when it is gone or cannot be read."""
        ...

    async def process_uid(self, pid: int) -> int | None:
        """The user id a process of the host runs as, None when it is gone or cannot be read."""
        ...

    async def dial(self, address: str, port: int) -> Streams:
        """A TCP connection to `address:port` as the host itself opens it (its loopback is its own).

        Raises:
            HostError: refused, unreachable or timed out, in one line.
        """
        ...


@runtime_checkable
class Transport(Protocol):
    """Runs argv lists on a machine. Quoting happens once, inside the transport."""

    name: str

    async def run(
        self, argv: Sequence[str], *, input: str | None = None, timeout_s: float | None = None
    ) -> CommandResult:
        """Run a command to completion and return its output."""
        ...

    def stream(self, argv: Sequence[str]) -> AsyncIterator[str]:
        """Run a long-lived command and yield its stdout lines; closing the iterator stops it."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class ServiceManager(Protocol):
    """systemd, or the demo's process manager that behaves like it."""

    async def state(self, unit: str) -> UnitState:
        ...

    async def start(self, unit: str) -> None:
        """Start without waiting for the engine; a failed state is cleared first (`reset-failed`)."""
        ...

    async def stop(self, unit: str) -> None:
        ...

    async def restart(self, unit: str) -> None:
        ...

    async def reset_failed(self, unit: str) -> None:
        ...

    async def read_file(self, path: str) -> str | None:
        """A file the console edits (an environment file), or None if it does not exist."""
        ...

    async def write_file(self, path: str, content: str) -> None:
        """Atomically write a file the units read (environment file or drop-in), keeping an existing
        file's mode and owner."""
        ...

    async def daemon_reload(self) -> None:
        ...

    def journal(
        self, unit: str, *, after_cursor: str | None = None, follow: bool = True, lines: int | None = None
    ) -> AsyncIterator[JournalEntry]:
        """Entries of a unit, oldest first; with `after_cursor` exactly those after it."""
        ...


@runtime_checkable
class GpuSource(Protocol):
    """GPU memory and utilisation of one host."""

    async def sample(self) -> GpuSnapshot:
        ...

    def stream(self, interval_s: float) -> AsyncIterator[GpuSnapshot]:
        ...


class SampledGpuSource:
    """Mixin: a GpuSource whose stream is its `sample()` repeated, each timed from the end of the last.

    For sources with no streaming command of their own (NVML, the simulated ledger, no GPUs);
    nvidia-smi over SSH streams `-lms` instead.
    """

    async def sample(self) -> GpuSnapshot:
        raise NotImplementedError

    async def stream(self, interval_s: float) -> AsyncIterator[GpuSnapshot]:
        while True:
            yield await self.sample()
            await asyncio.sleep(interval_s)


@runtime_checkable
class HealthProbe(Protocol):
    """Probes one service's HTTP endpoints."""

    async def probe(self) -> HealthSample:
        ...


class LockBusy(Exception):
    """Another console holds the switch lock of this service on this host."""


@runtime_checkable
class HostLock(Protocol):
    """A lock held on the host itself, so two consoles on two machines exclude each other."""

    def __call__(self, name: str) -> AbstractAsyncContextManager[None]:
        """Hold lock `name` for the `async with` block; raise LockBusy at once if it is held."""
        ...


@dataclass
class LinkStatus:
    """The connection to a host as the UI shows it: up or down, since when, and why."""

    state: str = "connecting"  # "up", "down", "connecting"
    since: float = field(default_factory=time.time)
    last_ok_at: float | None = None
    error: str | None = None
    reconnects: int = 0

    def mark_up(self) -> None:
        now = time.time()
        if self.state != "up":
            self.state, self.since, self.error = "up", now, None
        self.last_ok_at = now

    def mark_down(self, error: str) -> None:
        if self.state != "down":
            self.state, self.since = "down", time.time()
        self.error = error

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since the last good data, or None if there never was any."""
        if self.last_ok_at is None:
            return None
        return (now or time.time()) - self.last_ok_at


@dataclass
class Host:
    """Everything the ops layer and the UI need of one host, whatever its transport."""

    config: HostConfig
    services: ServiceManager
    gpus: GpuSource
    probes: dict[str, HealthProbe]
    """Health probe per service name."""
    lock: HostLock
    link: LinkStatus = field(default_factory=LinkStatus)
    transport: Transport | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    port_holder: Callable[[int], Awaitable[str | None]] | None = None
    """Who listens on a TCP port of the host, in words (`pid 4242 (python3 -m http.server 30000)`), or None
    when nothing does; None here when the host cannot tell. Names what answers a service's port when
    none of its units runs."""
    node: NodeFacts | None = None
    """Process states, routes and TCP as the host itself sees them, for a service's per-rank health."""
    tools: Transport | None = None
    """Runs the host's own diagnostic tools (`ps`, `py-spy`, `nvidia-smi -q`) for evidence (ops/evidence);
    None: the host's `transport` runs them (a simulated host brings its own stand-ins)."""
    peers: dict[str, Host] = field(default_factory=dict)
    """The other hosts of this host's services that span several hosts, by name (the factory links them)."""
    journals: JournalHub = field(init=False, repr=False)
    """Each unit's journal as one stream, shared by the pane, the switch watcher and the phase tracker."""

    def __post_init__(self) -> None:
        self.journals = JournalHub(lambda: self.services)

    @property
    def name(self) -> str:
        return self.config.name

    async def close(self) -> None:
        """Close streams and connections; never raises."""
        with contextlib.suppress(Exception):
            await self.journals.close()
        for closer in reversed(self.closers):
            with contextlib.suppress(Exception):
                await closer()
