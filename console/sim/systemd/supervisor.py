"""One simulated unit's supervisor: what systemd does for a `Type=simple` service, in a small process.

`python -m console.sim.systemd.supervisor --unit-dir DIR --unit NAME --description TEXT -- ARGV...`

It runs ARGV in its own process group, copies its stdout and stderr into the unit's journal file, keeps
the unit's state in `state.json`, and writes systemd's own lines (`Started ...`, `Main process exited,
code=exited, status=1/FAILURE`, `Failed with result 'exit-code'.`, `Deactivated successfully.`). SIGTERM
stops the unit: SIGTERM to the whole group, SIGKILL after the grace period, as `systemctl stop` does.
With `Restart=` loaded from the unit's drop-ins (unit_file.py), a main process that ends on its own is
started again after `RestartSec=`, in `activating/auto-restart` meanwhile, each restart counted in
`n_restarts` (systemd's NRestarts) and announced as `Scheduled restart job, restart counter is at N.`
With `--daemonize` it forks first, so the console that starts it never has to reap it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from console.hosts.procfs import proc_start_ticks
from console.sim.systemd.journal import PRIORITY_INFO, PRIORITY_WARNING, append_entry
from console.sim.systemd.unit_file import RestartPolicy, read_loaded
from console.sim.systemd.unit_state import write_state

_MAX_LINE_BYTES = 64 * 1024
#: Space set aside at start and given back when a journal write fails (ENOSPC), so the supervisor can
#: still record why the unit ended: its last journal lines and its state.
RESERVE_BYTES = 256 * 1024
RESERVE_FILE = "disk-reserve"


def _set_parent_death_signal() -> None:
    """The engine dies with its supervisor (Linux), so even kill -9 of the supervisor leaves no orphan."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Supervisor:
    """Runs one unit's main process to its end."""

    def __init__(self, unit_dir: Path, unit: str, description: str, stop_grace_s: float) -> None:
        self.unit_dir = unit_dir
        self.unit = unit
        self.description = description
        self.stop_grace_s = stop_grace_s
        self.journal = unit_dir / "journal.jsonl"
        self.stop_requested = threading.Event()
        self.output_done = threading.Event()
        self.journal_error: OSError | None = None
        """Set when the engine's output could not be written to the journal: the unit is then stopped."""
        self.state: dict = {
            "unit": unit,
            "supervisor_pid": os.getpid(),
            "supervisor_start": proc_start_ticks(os.getpid()),
            "n_restarts": 0,
        }

    def log(self, message: str, *, priority: int = PRIORITY_INFO) -> None:
        """systemd's own line about the unit; a full disk loses the line, never the supervisor."""
        with contextlib.suppress(OSError):
            append_entry(self.journal, message, pid=1, priority=priority, source="systemd")

    def set_state(self, active: str, sub: str, **extra: object) -> None:
        """Record the state; when the disk is full the record is lost, and a console that finds the
        supervisor gone reads the unit as failed (unit_state_from), which is still the truth."""
        self.state.update(active=active, sub=sub, since=time.time(), **extra)
        with contextlib.suppress(OSError):
            write_state(self.unit_dir, self.state)

    def _reserve_space(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self.unit_dir / RESERVE_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)

    def _journal_failed(self, exc: OSError) -> None:
        """The engine's output cannot be stored: give back the reserve, say so, and stop the unit (as
        a unit whose output nobody can read is not one an operator can run safely)."""
        self.journal_error = exc
        with contextlib.suppress(OSError):
            os.unlink(self.unit_dir / RESERVE_FILE)
        self.log(
            f"{self.unit}: Failed to write the unit's output to the journal: [Errno {exc.errno}] "
            f"{exc.strerror or exc}; stopping the unit",
            priority=PRIORITY_WARNING,
        )
        self.stop_requested.set()

    def run(self, argv: list[str]) -> int:
        self._reserve_space()
        policy = read_loaded(self.unit_dir)  # Restart= and RestartSec= as loaded at the last daemon-reload
        while True:
            restart = self._run_once(argv, policy)
            if restart is None:
                return 1
            if not restart or not self._restart_after(policy):
                return 0

    def _run_once(self, argv: list[str], policy: RestartPolicy) -> bool | None:
        """One start of the main process to its end; whether the policy restarts it (None: it never ran)."""
        self.output_done = threading.Event()
        self.set_state("activating", "start", result="success", main_pid=None, exec_main_status=None)
        self.log(f"Starting {self.description}...")
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as a whole on stop
                preexec_fn=_set_parent_death_signal,
            )
        except OSError as exc:
            self.log(f"{self.unit}: Failed to execute {argv[0]}: {exc.strerror}", priority=PRIORITY_WARNING)
            self.log(f"{self.unit}: Failed with result 'exit-code'.", priority=PRIORITY_WARNING)
            self.set_state("failed", "failed", result="exit-code", exec_main_status=203)
            return None
        self.state["pgid"] = proc.pid
        self.set_state("active", "running", main_pid=proc.pid, started_at=time.time())
        self.log(f"Started {self.description}.")
        reader = threading.Thread(target=self._copy_output, args=(proc,), daemon=True)
        reader.start()
        killed_after_timeout = self._wait(proc)
        reader.join(timeout=2.0)
        return self._finish(proc.returncode, killed_after_timeout, policy)

    def _restart_after(self, policy: RestartPolicy) -> bool:
        """Wait RestartSec in `auto-restart` (a stop ends the wait and the unit), then count the restart as
        systemd does (NRestarts) and say so in its words; False when the unit was stopped meanwhile."""
        if self.stop_requested.wait(timeout=policy.restart_sec):
            failed = self.state.get("result") not in (None, "success")
            self.set_state("failed" if failed else "inactive", "failed" if failed else "dead")
            self.log(f"Stopped {self.description}.")
            return False
        self.state["n_restarts"] = int(self.state.get("n_restarts") or 0) + 1
        self.log(f"{self.unit}: Scheduled restart job, restart counter is at {self.state['n_restarts']}.")
        self.log(f"Stopped {self.description}.")
        return True

    def _copy_output(self, proc: subprocess.Popen) -> None:
        """Copy the engine's output into the journal until it ends; output_done is set however this
        thread ends, so the main loop never waits on a dead reader (it used to, past SIGTERM)."""
        assert proc.stdout is not None
        try:
            for raw in iter(lambda: proc.stdout.readline(_MAX_LINE_BYTES), b""):
                if self.journal_error is not None:
                    continue  # keep draining, so the engine never blocks on a full pipe while it stops
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                try:
                    append_entry(self.journal, text, pid=proc.pid)
                except OSError as exc:
                    self._journal_failed(exc)
        finally:
            self.output_done.set()

    def _wait(self, proc: subprocess.Popen) -> bool:
        """Wait for the main process (and its output) to end; handle stop requests. True if SIGKILLed."""
        stop_deadline: float | None = None
        killed = False
        while True:
            if self.stop_requested.is_set() and stop_deadline is None:
                self.set_state("deactivating", "stop-sigterm")
                self.log(f"Stopping {self.description}...")
                _killpg(proc.pid, signal.SIGTERM)
                stop_deadline = time.monotonic() + self.stop_grace_s
            if stop_deadline is not None and not killed and time.monotonic() > stop_deadline:
                if proc.poll() is None:
                    self.log(
                        f"{self.unit}: State 'stop-sigterm' timed out. Killing.", priority=PRIORITY_WARNING
                    )
                    killed = True
                _killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is not None:
                # systemd's control-group semantics: when the main process ends, the rest of it goes too.
                _killpg(proc.pid, signal.SIGKILL)
                if self.output_done.wait(timeout=1.0):
                    return killed
            self.output_done.wait(timeout=0.01)

    def _finish(self, returncode: int, killed_after_timeout: bool, policy: RestartPolicy) -> bool:
        """Record how the main process ended; True when the policy starts it again."""
        stopping = self.stop_requested.is_set()
        if returncode >= 0:
            status, code = returncode, "exited"
            detail = f"status={returncode}/{'SUCCESS' if returncode == 0 else 'FAILURE'}"
        else:
            status, code = -returncode, "killed"
            detail = f"status={-returncode}/{signal.Signals(-returncode).name.removeprefix('SIG')}"
        clean = returncode == 0 or (stopping and returncode == -signal.SIGTERM and not killed_after_timeout)
        clean = clean and self.journal_error is None  # stopped for a full disk is a failure, not a stop
        if not clean:
            self.log(f"{self.unit}: Main process exited, code={code}, {detail}", priority=PRIORITY_WARNING)
        result = "success"
        if self.journal_error is not None:
            result = "resources"  # systemd's word for a unit that failed for want of a resource
        elif not clean:
            result = "timeout" if killed_after_timeout else ("exit-code" if code == "exited" else "signal")
            self.log(f"{self.unit}: Failed with result '{result}'.", priority=PRIORITY_WARNING)
        else:
            self.log(f"{self.unit}: Deactivated successfully.")
        if stopping and self.journal_error is None:
            self.log(f"Stopped {self.description}.")
        restart = not stopping and self.journal_error is None and policy.restarts_after(clean)
        if restart:  # systemd's auto-restart: activating, the result kept, until RestartSec has passed
            active, sub = "activating", "auto-restart"
        else:
            active, sub = ("inactive", "dead") if clean else ("failed", "failed")
        self.set_state(
            active,
            sub,
            result=result,
            exec_main_status=status,
            main_pid=None,
            exited_at=time.time(),
        )
        if not restart:
            with contextlib.suppress(OSError):
                os.unlink(self.unit_dir / RESERVE_FILE)
        return restart


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _daemonize() -> None:
    """Fork: the parent prints the supervisor's pid and exits; the child leads a new session."""
    pid = os.fork()
    if pid > 0:
        print(pid, flush=True)
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.sim.systemd.supervisor")
    parser.add_argument("--unit-dir", required=True, type=Path)
    parser.add_argument("--unit", required=True)
    parser.add_argument("--description", default="")
    parser.add_argument("--stop-grace-s", type=float, default=10.0)
    parser.add_argument("--daemonize", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    if args.daemonize:
        _daemonize()
    sup = Supervisor(args.unit_dir, args.unit, args.description or args.unit, args.stop_grace_s)
    signal.signal(signal.SIGTERM, lambda *_: sup.stop_requested.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return sup.run(command)


if __name__ == "__main__":
    sys.exit(main())
