"""A shutdown has a deadline (issue 31): after SIGTERM or SIGHUP a process that does not finish stopping what
it started in time runs its last resorts, names what did not stop in one line, and exits; a second signal
exits at once; with no stderr to take the line, it goes to the state dir's log."""

from __future__ import annotations

import contextlib
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
    import os, signal, sys, threading
    from pathlib import Path
    from console.cli import interrupt_on_termination
    from console.shutdown import SHUTDOWN

    interrupt_on_termination(deadline=True)
    SHUTDOWN.log_path = Path(sys.argv[1])
    marker = Path(sys.argv[2])
    SHUTDOWN.last_resort("the units of demo", lambda: marker.write_text("killed") or True)
    SHUTDOWN.last_resort("a unit already stopped", lambda: False)
    try:
        print("ready", flush=True)  # inside: the signal may come while print still returns
        while True:
            signal.pause()  # until the signal, whose handler raises KeyboardInterrupt
    except KeyboardInterrupt:
        with SHUTDOWN.stopping("sglang-k26@ep8.service on demo"):
            print("stopping", flush=True)
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
    said = proc.stdout.readline()
    assert said == "stopping\n", proc.stderr.read() if not said else said
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


def test_the_tui_demo_whose_unit_will_not_stop_is_killed_at_the_deadline_and_named(tmp_path):
    """A unit whose supervisor is frozen (SIGSTOP) takes 8 s to stop the orderly way: past the 2 s deadline
    the console kills what the demo started, says which, and exits 130."""
    import fcntl
    import json
    import pty
    import select
    import struct
    import termios

    from sim_fixtures import engine_pids
    from test_signals import kill_leftovers, sim_pids, story_env

    state = tmp_path / "state"
    env = dict(story_env(tmp_path), TERM="xterm-256color", SERVE_CONSOLE_STATE_DIR=str(state),
               SERVE_CONSOLE_SIM_TIME_SCALE="0.03", SERVE_CONSOLE_SHUTDOWN_DEADLINE_S="2")  # fmt: skip
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "console", "--demo"], stdin=slave, stdout=slave, stderr=slave,
                            cwd=REPO, env=env, start_new_session=True)  # fmt: skip
    os.close(slave)
    seen = bytearray()

    def drained() -> bool:  # keeps the terminal's buffer from filling, and keeps what it said
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
        return False

    frozen: list[int] = []
    try:
        assert wait_until(lambda: drained() or engine_pids(tmp_path), timeout_s=60), "the demo's EP8 never started"
        unit_state = state / "hosts" / "demo" / "units" / "sglang-k26@ep8.service" / "state.json"
        assert wait_until(lambda: drained() or unit_state.exists(), timeout_s=30), sorted(state.rglob("*"))
        frozen.append(json.loads(unit_state.read_text())["supervisor_pid"])
        os.kill(frozen[0], signal.SIGSTOP)
        proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: drained() or proc.poll() is not None, timeout_s=30)
        drained()
        assert proc.returncode == 130
        text = seen.decode(errors="replace")
        assert "the shutdown took longer than 2 s" in text
        assert "not stopped in time:" in text and "sglang-k26@ep8.service on demo" in text
        assert "the demo's units" in text
        assert wait_until(lambda: not sim_pids(tmp_path), timeout_s=30), sim_pids(tmp_path)
    finally:
        for pid in frozen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        kill_leftovers(tmp_path)


def test_the_tui_exits_when_its_terminal_closes_without_a_signal(tmp_path):
    """A terminal that is not the console's controlling one sends no SIGHUP when it goes: the failed writes
    and reads say it is gone, and the console ends within the deadline (it blocked in a write before)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    from test_signals import kill_leftovers, story_env

    env = dict(story_env(tmp_path), TERM="xterm-256color", SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"),
               SERVE_CONSOLE_DEMO_NO_START="1")  # fmt: skip
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "console", "--demo"], stdin=slave, stdout=slave, stderr=slave,
                            cwd=REPO, env=env, start_new_session=True)  # fmt: skip
    os.close(slave)
    seen = bytearray()

    def drawn() -> bool:
        while select.select([master], [], [], 0)[0]:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                break
        return b"kimi-k2.6" in seen

    try:
        assert wait_until(drawn, timeout_s=60), "the console never drew its host"
        os.close(master)  # the terminal goes away; no signal comes
        master = -1
        assert wait_until(lambda: proc.poll() is not None, timeout_s=30), "the console outlived its terminal"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if master >= 0:
            os.close(master)
        kill_leftovers(tmp_path)
