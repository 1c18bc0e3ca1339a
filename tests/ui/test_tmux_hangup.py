"""The console exits when its terminal goes away, whatever it was doing (issue 31).

`serve-console --demo` runs in tmux beside two CPU hogs, and the tmux server is killed (SIGHUP, SIGCONT and
a hung-up terminal, as when an SSH session drops) at random moments of start-up, of the demo's first switch,
of a probe and of quitting. Every console must exit, and leave none of the units it started running. On the
old code 5 of 12 kills left the process blocked for good in a write to the dead terminal.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tmux_driver import BIN, Tmux, engine_pids
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"),
]

KILLS = 50
PARALLEL = 5
#: A hang guard per process, not a speed figure: each console has this long to exit after its terminal goes.
EXIT_GUARD_S = 10.0
MOMENTS = ("start-up", "switch", "probe", "quit")


@contextlib.contextmanager
def cpu_hogs(count: int = 2):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:  # killed even when the test fails
        for hog in hogs:
            hog.kill()
            hog.wait()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def described(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        argv = "?"
    dump = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    stacks = ""
    if Path(dump).exists():  # where py-spy is installed, what the process waits on
        stacks = subprocess.run([dump, "dump", "--pid", str(pid)], capture_output=True, text=True).stdout
    return f"{pid} {argv[:160]}\n{stacks}"


def one_kill(i: int, moment: str, root: Path, rng: random.Random) -> str | None:
    """Start the demo in tmux, kill its terminal at `moment`; a line saying what stayed, or None."""
    state = root / f"state-{i}"
    tmux = Tmux(f"sc-hangup-{os.getpid()}-{i}")
    env = (f"-u COLUMNS -u LINES SERVE_CONSOLE_STATE_DIR={state} SERVE_CONSOLE_SIM_TIME_SCALE=0.02 "
           f"SERVE_CONSOLE_PORT_LOCK_DIR={root / 'locks'} TMPDIR={root / 'tmp'} TERM=xterm-256color")  # fmt: skip
    pid = 0
    try:
        tmux("new-session", "-d", "-s", "console", "-x", "120", "-y", "40", f"exec env {env} {BIN} --demo")
        pid = int(tmux("display", "-p", "-t", "console", "#{pane_pid}").strip())
        # A console that ended by itself meanwhile (a demo port taken by a parallel run) is no hang: the
        # moment passes, and the kill and the checks below still run.
        with contextlib.suppress(AssertionError):
            if moment == "start-up":
                time.sleep(rng.uniform(0.1, 3.0))  # a random moment is the point here, not a wait for an event
            elif moment == "switch":  # the demo's first act is a switch to EP8
                tmux.wait_for("kimi-k2.6", timeout_s=60)
                time.sleep(rng.uniform(0.0, 4.0))
            else:
                tmux.wait_for("READY EP8", timeout_s=90)
                tmux("send-keys", "-t", "console", "b" if moment == "probe" else "q")
                if moment == "probe":
                    tmux.wait_for("probe kimi-k2.6 on", timeout_s=30)
                    tmux("send-keys", "-t", "console", "y")
                time.sleep(rng.uniform(0.0, 1.5))
        tmux("kill-server", check=False)
        wait_until(lambda: not (alive(pid) or engine_pids(state)), timeout_s=EXIT_GUARD_S)
        left = ([pid] if alive(pid) else []) + engine_pids(state)
        if not left:
            return None
        return f"kill {i} ({moment}): still running {EXIT_GUARD_S:g} s after: " + "; ".join(map(described, left))
    finally:
        tmux("kill-server", check=False)
        for stray in ([pid] if pid and alive(pid) else []) + engine_pids(state):
            with contextlib.suppress(OSError):
                os.kill(stray, signal.SIGKILL)


def test_the_console_exits_whenever_its_terminal_goes_away(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    seed = int(os.environ.get("SERVE_CONSOLE_HANGUP_SEED", time.time()))
    rng = random.Random(seed)
    plan = [(i, MOMENTS[i % len(MOMENTS)], random.Random(rng.random())) for i in range(KILLS)]
    with cpu_hogs(2), concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        stayed = [r for r in pool.map(lambda p: one_kill(p[0], p[1], tmp_path, p[2]), plan) if r]
    assert not stayed, f"seed {seed}:\n" + "\n".join(stayed)
