"""A shutdown has a deadline (issue 31): after SIGTERM or SIGHUP a process that does not finish stopping what
it started in time runs its last resorts, names what did not stop in one line, and exits; a second signal
exits at once; with no stderr to take the line, it goes to the state dir's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from sim_fixtures import REPO, wait_until

#: The process under test: the console's signal handling, then a shutdown that blocks for good (as the
#: TUI's loop did in a write to a dead terminal), with one thing still being stopped and one last resort.
SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    from pathlib import Path
    from console.cli import interrupt_on_termination
    from console.shutdown import SHUTDOWN

    interrupt_on_termination(deadline=True)
    SHUTDOWN.log_path = Path(sys.argv[1])
    marker = Path(sys.argv[2])
    SHUTDOWN.last_resort("the units of demo", lambda: marker.write_text("killed") or True)
    SHUTDOWN.last_resort("a unit already stopped", lambda: False)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        print("stopping", flush=True)
        with SHUTDOWN.stopping("sglang-k26@ep8.service on demo"):
            threading.Event().wait()  # blocked for good
""")


def start(tmp_path: Path, deadline_s: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, SERVE_CONSOLE_SHUTDOWN_DEADLINE_S=deadline_s, PYTHONPATH=str(REPO))
    popen.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path / "shutdown.log"), str(tmp_path / "marker")],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, **popen)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def finish(proc: subprocess.Popen, guard_s: float = 30) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=guard_s)  # a hang guard, not a speed figure
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err or ""


def test_a_shutdown_that_blocks_ends_at_its_deadline_naming_what_did_not_stop(tmp_path):
    proc = start(tmp_path, "1")
    proc.send_signal(signal.SIGHUP)
    code, err = finish(proc)
    assert code == 130
    (line,) = err.strip().splitlines()
    assert line.startswith("serve-console: exiting at once (SIGHUP received: the shutdown took longer than 1 s)")
    assert "not stopped in time: sglang-k26@ep8.service on demo, the units of demo" in line
    assert "already stopped" not in line
    assert (tmp_path / "marker").read_text() == "killed"  # the last resort ran


def test_a_second_sigterm_during_the_shutdown_exits_at_once(tmp_path):
    proc = start(tmp_path, "600")
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline() == "stopping\n"
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)  # the 600 s deadline would outlast the guard: only the second signal ends it
    assert code == 130
    assert "SIGTERM again during the shutdown (SIGTERM received)" in err
    assert "sglang-k26@ep8.service on demo" in err


def test_with_its_terminal_gone_the_note_goes_to_the_state_dirs_log(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # stderr that takes nothing, as a hung-up terminal (EPIPE here, EIO there)
    proc = start(tmp_path, "1", stderr=write_end)
    os.close(write_end)
    proc.send_signal(signal.SIGTERM)
    code, _err = finish(proc)
    assert code == 130
    assert wait_until(lambda: (tmp_path / "shutdown.log").exists(), timeout_s=30)
    (line,) = (tmp_path / "shutdown.log").read_text().splitlines()
    assert "exiting at once (SIGTERM received" in line and "sglang-k26@ep8.service on demo" in line
