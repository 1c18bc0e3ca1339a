"""The simulated host's service manager: systemd's interface over detached local processes.

Each unit runs under its own supervisor (`console.sim.systemd.supervisor`), which outlives the console that
started it, exactly as a systemd unit outlives `systemctl`. Everything lives in the state dir:

    <state>/hosts/<host>/units/<unit>/state.json     the unit's state, written by its supervisor
    <state>/hosts/<host>/units/<unit>/journal.jsonl  its journal (see journal.py)
    <state>/hosts/<host>/files/...                   the host's "filesystem" for env files and drop-ins
    <state>/hosts/<host>/ledger/                     the simulated GPUs' memory ledger

so a second console (`status`, `tail`) sees the same units.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from console.config import HostConfig
from console.domain.values import JournalEntry, UnitState
from console.errors import HostError
from console.hosts.procfs import group_alive, pid_alive
from console.hosts.state_dir import sim_host_dir
from console.sim.demo_cluster import reserved_elsewhere
from console.sim.host import units as sim_units
from console.sim.host.host_files import SimHostFiles
from console.sim.host.ports import port_taken_by, record_url
from console.sim.systemd import (
    PRIORITY_WARNING,
    append_entry,
    follow_journal,
    parse_cursor,
    read_state,
    supervisor_alive,
    unit_state_from,
    write_state,
)

#: Seconds between SIGTERM and SIGKILL when a unit stops (systemd's TimeoutStopSec, shortened).
DEFAULT_STOP_GRACE_S = 5.0
_POLL_S = 0.01


async def _to_the_end(action: Callable[..., None], *args: Any) -> None:
    """Run a blocking start or stop in a thread. A cancel waits for it to end (the thread goes on whatever
    happens), so the action lands under the unit's lock and what follows (the demo's clean exit, an
    explore's way back to a ready layout) sees the unit as it really is, as after a `systemctl` that
    was cut off."""
    done = asyncio.ensure_future(asyncio.to_thread(action, *args))
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        # Every cancel, not only the first: an app that shuts down cancels its workers more than once, and
        # a start cut off at the second left the unit's lock while its thread still spawned the unit (the
        # demo's clean exit then found nothing to stop, and the unit ran on).
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({done})  # never raises the action's own error, nor cancels it
        if not done.cancelled():
            done.exception()  # seen: the cancel is what this caller reports
        raise


class ProcessManager:
    """ServiceManager for a `transport = "sim"` host."""

    def __init__(
        self, cfg: HostConfig, state_root: Path, *, stop_grace_s: float = DEFAULT_STOP_GRACE_S
    ) -> None:
        self.cfg = cfg
        self.state_root = state_root
        self.root = sim_host_dir(state_root, cfg.name)
        self.units_dir = self.root / "units"
        self.files = SimHostFiles(cfg, self.root)
        self.files_dir = self.files.files_dir
        self.ledger_dir = self.root / "ledger"
        self.stop_grace_s = stop_grace_s
        for folder in (self.units_dir, self.files_dir, self.ledger_dir):
            folder.mkdir(parents=True, exist_ok=True)

    # -- paths -------------------------------------------------------------------------------------------

    def unit_dir(self, unit: str, *, create: bool = True) -> Path:
        if not unit or "/" in unit or unit.startswith(".") or "\0" in unit:
            raise HostError(self.cfg.name, f"invalid unit name {unit!r}")
        path = self.units_dir / unit
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.asynccontextmanager
    async def _unit_lock(self, unit: str) -> AsyncIterator[None]:
        """Serialises start/stop of one unit across consoles (held only for the action itself)."""
        fd = os.open(self.unit_dir(unit) / "ctl.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- ServiceManager ----------------------------------------------------------------------------------

    async def state(self, unit: str) -> UnitState:
        loaded = sim_units.find_unit(self.cfg, unit) is not None
        return unit_state_from(unit, read_state(self.unit_dir(unit, create=False)), loaded=loaded)

    async def start(self, unit: str) -> None:
        spec = sim_units.find_unit(self.cfg, unit)
        if spec is None:
            raise HostError(self.cfg.name, f"Unit {unit} not found.")
        async with self._unit_lock(unit):
            if (await self.state(unit)).is_running:
                return  # as `systemctl start` on an active unit: nothing to do
            argv, env, port = self._command(spec)
            await asyncio.to_thread(self._check_port_free, spec, port)
            try:
                await _to_the_end(self._spawn, spec, argv, env)
            except OSError as exc:  # an already full disk, a read-only state dir: one line
                raise HostError(
                    self.cfg.name, f"{unit}: cannot start it: {exc.strerror or exc} (in {self.unit_dir(unit, create=False)})"
                ) from None

    async def stop(self, unit: str) -> None:
        async with self._unit_lock(unit):
            await _to_the_end(self._stop_blocking, unit)

    async def restart(self, unit: str) -> None:
        await self.stop(unit)
        await self.start(unit)

    async def reset_failed(self, unit: str) -> None:
        unit_dir = self.unit_dir(unit, create=False)
        raw = read_state(unit_dir)
        if raw is not None and unit_state_from(unit, raw).active == "failed":
            raw.update(active="inactive", sub="dead", result="success", main_pid=None, since=time.time())
            write_state(unit_dir, raw)

    async def read_file(self, path: str) -> str | None:
        return await self.files.read_file(path)

    async def write_file(self, path: str, content: str) -> None:
        await self.files.write_file(path, content)

    async def daemon_reload(self) -> None:
        self.files.reload_drop_ins()

    def journal(
        self, unit: str, *, after_cursor: str | None = None, follow: bool = True, lines: int | None = None
    ) -> AsyncIterator[JournalEntry]:
        try:
            if after_cursor is not None:
                parse_cursor(after_cursor)  # a bad cursor fails here, not at the first entry
            return follow_journal(
                self.unit_dir(unit, create=False) / "journal.jsonl",
                unit,
                after_cursor=after_cursor,
                follow=follow,
                lines=lines,
            )
        except ValueError as exc:
            raise HostError(self.cfg.name, str(exc)) from exc

    # -- beyond the protocol -----------------------------------------------------------------------------

    def known_units(self) -> list[str]:
        return [u for s in (*self.cfg.services, *self.cfg.node_of) for u in s.all_units()]

    async def stop_all(self) -> None:
        """Stop every unit of this host that runs (the demo's clean exit)."""
        for unit in self.known_units():
            if (await self.state(unit)).is_running:
                await self.stop(unit)

    def kill_all(self, spare: frozenset[str] = frozenset()) -> bool:
        """SIGKILL what still runs of this host's units but those in `spare`, supervisors and engines (the
        shutdown's last resort, from its watchdog thread); True when something ran."""
        killed = False
        for unit in self.known_units():
            if unit in spare:
                continue
            raw = read_state(self.unit_dir(unit, create=False)) or {}
            if supervisor_alive(raw):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(raw["supervisor_pid"], signal.SIGKILL)
                    killed = True
            pgid = raw.get("pgid")
            if pgid and group_alive(pgid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed = True
        return killed

    def running_pids(self, unit: str) -> list[int]:
        """Pids of the unit's supervisor and engine that are still alive (for tests: no orphans)."""
        raw = read_state(self.unit_dir(unit, create=False)) or {}
        pids = []
        if supervisor_alive(raw):
            pids.append(raw["supervisor_pid"])
        pgid = raw.get("pgid")
        if pgid and group_alive(pgid):
            pids.append(pgid)
        return pids

    # -- internals ---------------------------------------------------------------------------------------

    def _command(self, spec: sim_units.UnitSpec) -> tuple[list[str], dict[str, str], int]:
        """The unit's argv, its environment, and the port its engine will listen on."""
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        layout_args, unit_env = self.files.layout_args(spec)
        env.update(unit_env)
        env.update(sim_units.node_env(self.cfg, spec.service))
        argv = sim_units.engine_command(self.cfg, spec, layout_args, self.ledger_dir, unit_env=unit_env)
        return argv, env, sim_units.unit_port(spec.service, unit_env)

    def _check_port_free(self, spec: sim_units.UnitSpec, port: int) -> None:
        """Refuse, in one line, a start whose port another program holds (the engine would bind it and
        die, and a switch roll back onto the same taken port); an engine of this host may hold it."""
        groups = [(read_state(self.unit_dir(u, create=False)) or {}).get("pgid") for u in self.known_units()]
        taken = port_taken_by(spec.service, {g for g in groups if isinstance(g, int)}, port)
        if taken is None:  # free now, but a demo on another state dir may be between two of its engines
            reason = reserved_elsewhere(port, self.state_root)
            taken = None if reason is None else f"{reason} ({spec.service.url})"
        if taken is not None:
            raise HostError(self.cfg.name, f"{spec.unit}: {taken}")

    def _spawn(self, spec: sim_units.UnitSpec, argv: list[str], env: dict[str, str]) -> None:
        unit_dir = self.unit_dir(spec.unit)
        record_url(unit_dir, spec.service.url)
        command = [
            sys.executable, "-m", "console.sim.systemd.supervisor", "--daemonize",
            "--unit-dir", str(unit_dir), "--unit", spec.unit, "--description", spec.description,
            "--stop-grace-s", str(self.stop_grace_s), "--", *argv,
        ]  # fmt: skip
        with open(unit_dir / "supervisor.log", "ab") as log:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, close_fds=True
            )
            out, _ = proc.communicate(timeout=30)
        try:
            pid = int(out.strip())
        except ValueError:
            raise HostError(self.cfg.name, f"{spec.unit}: the supervisor did not start") from None
        # As `systemctl start` of a Type=simple unit: return once the main process is forked.
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:
            raw = read_state(unit_dir)
            if raw and raw.get("supervisor_pid") == pid and raw.get("active") != "activating":
                return
            if not pid_alive(pid) and (raw or {}).get("supervisor_pid") != pid:
                break
            time.sleep(_POLL_S)
        raise HostError(
            self.cfg.name, f"{spec.unit}: the supervisor did not start (see {unit_dir}/supervisor.log)"
        )

    def _stop_blocking(self, unit: str) -> None:
        unit_dir = self.unit_dir(unit)
        raw = read_state(unit_dir)
        if raw is None:
            return
        sup_pid, pgid = raw.get("supervisor_pid"), raw.get("pgid")
        if supervisor_alive(raw):
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup_pid, signal.SIGTERM)
            deadline = time.monotonic() + self.stop_grace_s + 3.0
            while supervisor_alive(raw) and time.monotonic() < deadline:
                time.sleep(_POLL_S)
        if supervisor_alive(raw):  # a wedged supervisor: take over its job
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup_pid, signal.SIGKILL)
        if pgid and group_alive(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        after = read_state(unit_dir) or raw
        if after.get("active") in ("activating", "active", "deactivating"):
            # The supervisor died without recording the end: record it as systemd would have.
            journal = unit_dir / "journal.jsonl"
            append_entry(
                journal,
                f"{unit}: Failed with result 'signal'.",
                pid=1,
                priority=PRIORITY_WARNING,
                source="systemd",
            )
            after.update(active="failed", sub="failed", result="signal", main_pid=None, since=time.time())
            write_state(unit_dir, after)

