"""A `transport = "sim"` host: process manager, simulated GPU ledger, HTTP probes and a file lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from console.config import HostConfig, ServiceConfig
from console.domain.models import HealthSample
from console.hosts.base import HealthProbe, Host, LinkStatus, LockBusy
from console.hosts.procman import ProcessManager
from console.hosts.sim_units import sim_settings


class FileHostLock:
    """HostLock over `flock` files in the simulated host's state dir, so consoles exclude each other."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    @contextlib.asynccontextmanager
    async def __call__(self, name: str) -> AsyncIterator[None]:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        fd = os.open(self.directory / f"{safe}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                raise LockBusy(
                    f"{name} is held by another console{f' (pid {holder})' if holder else ''}"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


class SimHealthProbe:
    """GET /health with aiohttp: refused means down, 503 starting, 200 ready."""

    def __init__(self, url: str, *, timeout_s: float = 2.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    async def probe(self) -> HealthSample:
        import aiohttp

        started = time.time()
        t0 = time.monotonic()
        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.get(f"{self.url}/health") as resp:
                    status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return HealthSample(started, "down", error=str(exc) or type(exc).__name__)
        latency = time.monotonic() - t0
        return HealthSample(
            started, "ready" if status == 200 else "starting", http_status=status, latency_s=latency
        )


def health_probe(service: ServiceConfig) -> HealthProbe:
    """The remote helper's HttpHealthProbe when it is there, else the small local one."""
    try:
        from console.hosts.health import HttpHealthProbe
    except ImportError:
        return SimHealthProbe(service.url)
    return HttpHealthProbe(service.url, service.engine)


def build_sim_host(cfg: HostConfig, state_root: Path) -> Host:
    """A Host whose units run as local processes under the state dir `state_root`."""
    from console.sim.ledger import LedgerGpuSource, ensure_inventory

    manager = ProcessManager(cfg, state_root)
    sim = sim_settings(cfg)
    ensure_inventory(manager.ledger_dir, sim.gpu_count, sim.gpu_total_mib, sim.gpu_name, host=cfg.name)
    link = LinkStatus()
    link.mark_up()
    return Host(
        config=cfg,
        services=manager,
        gpus=LedgerGpuSource(manager.ledger_dir),
        probes={s.name: health_probe(s) for s in cfg.services},
        lock=FileHostLock(manager.root / "locks"),
        link=link,
    )
