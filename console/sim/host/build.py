"""A `transport = "sim"` host: process manager, simulated GPU ledger, HTTP probes and a file lock.

The probes are the real hosts' `HttpHealthProbe`, pointed at the local engine."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path

from console.config import HostConfig
from console.domain.values import GpuSnapshot
from console.hosts.base import Host, LinkStatus, LockBusy, SampledGpuSource
from console.hosts.node_facts import LocalNodeFacts
from console.shutdown import SHUTDOWN
from console.sim.demo_cluster import note_state_root
from console.sim.host.ports import port_holder_words, serving_urls
from console.sim.host.procman import ProcessManager
from console.sim.host.tools import SimTools
from console.sim.host.units import node_loopback, service_port, sim_settings, time_scale
from console.sim.ledger import read_snapshot


class LedgerGpuSource(SampledGpuSource):
    """GpuSource over a ledger directory on this machine (the `sim` host's GPUs)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    async def sample(self) -> GpuSnapshot:
        """One snapshot, read off the event loop's thread."""
        return await asyncio.to_thread(read_snapshot, self.directory)


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


def build_sim_host(cfg: HostConfig, state_root: Path, *, stop_units_on_close: bool = False) -> Host:
    """A Host whose units run as local processes under the state dir `state_root`.

    A service whose unit runs is reached at the URL that unit was started with (ports.py), which may
    not be the config's: the demo moves off a taken port, the repo's hosts.toml does not.

    Units outlive the console, as systemd units do, unless `stop_units_on_close` (the demo's own cluster):
    then `Host.close()` stops every unit the host runs, so a closed console leaves no engine behind.
    """
    from console.hosts.endpoints import HttpHealthProbe
    from console.sim.ledger import ensure_inventory

    time_scale(cfg)  # a bad SERVE_CONSOLE_SIM_TIME_SCALE is one line now, not a vague failure at start
    cfg = serving_urls(cfg, state_root)  # a running unit's port, wherever the config says it serves
    note_state_root([service_port(s) for s in cfg.services], state_root)  # a demo's ports: whose units
    manager = ProcessManager(cfg, state_root)
    sim = sim_settings(cfg)
    ensure_inventory(manager.ledger_dir, sim.gpu_count, sim.gpu_total_mib, sim.gpu_name, host=cfg.name)
    link = LinkStatus()
    link.mark_up()
    probes = {s.name: HttpHealthProbe(s.url, s.engine) for s in cfg.services}
    closers = [p.close for p in probes.values()]
    if stop_units_on_close:
        closers.insert(0, manager.stop_all)  # closers run in reverse: this one last
        # Past the shutdown's deadline, whatever still runs of them is killed before the process exits.
        SHUTDOWN.last_resort(f"the units of {cfg.name}", manager.kill_all)
    return Host(
        config=cfg,
        services=manager,
        gpus=LedgerGpuSource(manager.ledger_dir),
        probes=dict(probes),
        lock=FileHostLock(manager.root / "locks"),
        link=link,
        closers=closers,
        port_holder=_port_holder,
        node=LocalNodeFacts(cfg.name, node_loopback(cfg)),
        tools=SimTools(cfg.name, manager.ledger_dir),
    )


async def _port_holder(port: int) -> str | None:
    """Who listens on `port` of this machine (the simulated host's), read from /proc."""
    return await asyncio.to_thread(port_holder_words, port)
