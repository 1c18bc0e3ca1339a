"""The Host of a real machine: SSH or local transport, systemd, GPUs, health probes and a lock held
on the machine itself."""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from console.config import HostConfig
from console.domain.urls import is_loopback_url
from console.domain.values import GpuSnapshot
from console.errors import HostError, UsageError
from console.hosts.argv import CommandFailed
from console.hosts.base import (
    GpuSource,
    HealthProbe,
    Host,
    LinkStatus,
    LockBusy,
    SampledGpuSource,
    Transport,
)
from console.hosts.endpoints import HttpHealthProbe
from console.hosts.gpus import DcgmSource, NvidiaSmiSource, NvmlSource
from console.hosts.listeners import ss_port_holder
from console.hosts.local import LocalTransport
from console.hosts.node_facts import TransportNodeFacts
from console.hosts.ssh import SshPortForward, SshTransport
from console.hosts.systemd import SystemdManager

#: Where root's consoles keep their switch locks on a host: only root may write there (mode 0700), so
#: no other local user can take a lock and block switches (/run/lock is world-writable). A console
#: logged in as another user keeps its locks in that user's runtime dir (/run/user/UID/serve-console,
#: 0700 too); consoles of different accounts therefore do not exclude each other.
LOCK_DIR = "/run/serve-console"
_LOCK_BUSY_EXIT = 75  # flock -E: the exit status that means "held by someone else"
# Picks the lock dir for the remote user, makes it (0700), refuses one that is a symlink or not the
# user's own, then holds the lock: `flock` prints "locked PID FILE" and its child waits on stdin.
_TAKE_LOCK = (
    'umask 077; if [ "$(id -u)" = 0 ]; then d="$2"; else d="${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/serve-console"; fi; '
    'mkdir -p -m 0700 -- "$d" 2>/dev/null; '
    'if [ -L "$d" ] || [ ! -d "$d" ] || [ ! -O "$d" ]; then echo "unsafe $d"; exit 0; fi; '
    'chmod 0700 -- "$d" && L="$d/$1" && export L && '
    f'exec flock -n -E {_LOCK_BUSY_EXIT} "$L" -c \'echo "locked $PPID $L"; exec cat\''
)
# Waits (at most ~5 s) until the holder's flock process is gone, i.e. the host has let go of the lock.
_WAIT_GONE = 'i=0; while kill -0 "$1" 2>/dev/null && [ "$i" -lt 500 ]; do sleep 0.01; i=$((i+1)); done'


def lock_file_name(name: str) -> str:
    """The lock file's name for lock `name` (any text: it is reduced to safe file-name characters)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "lock"
    return f"serve-console-{safe}.lock"


def lock_path(name: str) -> str:
    """The lock file of lock `name` for a console logged in as root."""
    return f"{LOCK_DIR}/{lock_file_name(name)}"


class FlockHostLock:
    """HostLock held on the host: a long-lived `flock -n FILE` whose child waits on stdin.

    The lock lives exactly as long as the channel: leaving the `async with` closes it (the child
    sees EOF and exits), and so does a dropped connection or a crashed console.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def __call__(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self._hold(name)

    @contextlib.asynccontextmanager
    async def _hold(self, name: str) -> AsyncIterator[None]:
        path = lock_path(name)
        holder, flock_pid = await self._take(name, path)
        try:
            yield
        finally:
            await holder.aclose()
            await self._wait_released(flock_pid)

    async def _wait_released(self, flock_pid: str) -> None:
        """Return once the host has let go: closing an SSH channel does not wait for its command, and
        a switch started right after this one (the same console's next) would be refused by it."""
        if not flock_pid.isdigit():
            return
        with contextlib.suppress(Exception):  # a lost connection releases the lock by itself
            await self.transport.run(["sh", "-c", _WAIT_GONE, "sh", flock_pid], timeout_s=10.0)

    async def _take(self, name: str, path: str) -> tuple[AsyncIterator[str], str]:
        """Start the holder and wait for its "locked PID" (PID: the flock process, whose exit releases
        the lock); the holder stream keeps the lock."""
        argv = ["sh", "-c", _TAKE_LOCK, "sh", lock_file_name(name), LOCK_DIR]
        for attempt in (1, 2):
            holder = self.transport.stream(argv)
            try:
                first = await anext(holder)
            except StopAsyncIteration:
                # Seen once under heavy load: the holder ended cleanly before saying "locked".
                # It held nothing, so one more try is safe.
                await holder.aclose()
                if attempt == 1:
                    continue
                raise HostError(self.transport.name, f"flock {path} ended without taking the lock") from None
            except CommandFailed as exc:
                await holder.aclose()
                if exc.result.exit_status == _LOCK_BUSY_EXIT:
                    raise LockBusy(
                        f"{self.transport.name}: {name!r} is locked by another console (lock file {path})"
                    ) from None
                raise
            except BaseException:
                await holder.aclose()
                raise
            said, _, rest = first.strip().partition(" ")
            flock_pid = rest.partition(" ")[0]
            if said == "unsafe":
                await holder.aclose()
                raise HostError(
                    self.transport.name,
                    f"lock dir {rest[:200]!r} is not a directory of this user's own (mode 0700); refusing to "
                    "take the switch lock there (remove it, or log in as its owner)",
                )
            if said != "locked":
                await holder.aclose()
                raise HostError(self.transport.name, f"unexpected output while taking {path}: {first[:80]!r}")
            return holder, flock_pid
        raise AssertionError("unreachable")


class NoGpuSource(SampledGpuSource):
    """GpuSource for hosts configured with `gpus = "none"`."""

    async def sample(self) -> GpuSnapshot:
        return GpuSnapshot(taken_at=time.time(), error="no GPU source configured for this host")


def _gpu_source(cfg: HostConfig, transport: Transport) -> GpuSource:
    if cfg.gpus == "nvidia-smi":
        return NvidiaSmiSource(transport)
    if cfg.gpus == "nvml":
        if cfg.transport != "local":
            raise UsageError(
                f'host {cfg.name}: gpus = "nvml" reads this machine\'s GPUs; use it with transport = "local"'
            )
        return NvmlSource()
    if cfg.gpus == "none":
        return NoGpuSource()
    if cfg.gpus == "dcgm":
        forward = None
        if isinstance(transport, SshTransport):  # the exporter listens on the host: reach it over SSH
            parts = urlsplit(cfg.dcgm_url)
            forward = SshPortForward(transport, parts.hostname or "127.0.0.1", parts.port or 80)
        return DcgmSource(cfg.dcgm_url, host=cfg.name, forward=forward)
    raise UsageError(f"host {cfg.name}: gpus = {cfg.gpus!r} is not available for transport {cfg.transport!r}")


def build_remote_host(cfg: HostConfig) -> Host:
    """Build the Host for a `transport = "ssh"` or `"local"` entry. Nothing connects yet: the SSH
    connection opens on first use, so building never blocks on a down host.

    Raises:
        UsageError: for settings this transport cannot honour.
    """
    link = LinkStatus()
    transport: Transport
    closers = []
    if cfg.transport == "ssh":
        transport = SshTransport(cfg, link)
    elif cfg.transport == "local":
        transport = LocalTransport(cfg.name)
        link.mark_up()
    else:
        raise UsageError(f"host {cfg.name}: build_remote_host cannot build transport {cfg.transport!r}")
    sudo_units = frozenset(u for s in cfg.services if s.sudo for u in s.all_units())
    services = SystemdManager(transport, sudo=False, sudo_units=sudo_units)
    gpus = _gpu_source(cfg, transport)
    probes: dict[str, HealthProbe] = {}
    for svc in cfg.services:
        forward = None
        # A loopback URL of an SSH host is the host's own: it is reached through the connection, never
        # probed here (where something else may answer), whatever health_via says.
        if svc.health_via == "ssh" or (isinstance(transport, SshTransport) and is_loopback_url(svc.url)):
            if not isinstance(transport, SshTransport):
                raise UsageError(
                    f'host {cfg.name}, service {svc.name}: health_via = "ssh" needs transport = "ssh"'
                )
            parts = urlsplit(svc.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            forward = SshPortForward(transport, parts.hostname or "127.0.0.1", port)
            closers.append(forward.close)
        probe = HttpHealthProbe(svc.url, svc.engine, forward=forward)
        probes[svc.name] = probe
        closers.append(probe.close)
    if isinstance(gpus, (NvmlSource, DcgmSource)):
        closers.append(gpus.close)
    # Host.close runs closers in reverse: probes and forwards first, the connection last.
    closers.insert(0, transport.close)
    return Host(
        config=cfg,
        services=services,
        gpus=gpus,
        probes=probes,
        lock=FlockHostLock(transport),
        link=link,
        transport=transport,
        closers=closers,
        port_holder=functools.partial(ss_port_holder, transport),
        node=TransportNodeFacts(transport, cfg.name),
    )
