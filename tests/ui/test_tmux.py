"""A real terminal: `serve-console --demo` in tmux, the switch by keys, the OOM found on the screen."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from waiting import WaitTimeout, wait_for, wait_until

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin" / "serve-console"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10)
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "console", check=False)

    def wait_for(self, *needles: str, timeout_s: float = 40.0) -> str:
        last = {"text": ""}

        def shown() -> str | None:
            last["text"] = text = self.screen()
            return text if all(n in text for n in needles) else None

        try:
            return wait_for(shown, f"{needles!r} on the screen", timeout_s=timeout_s, interval_s=0.2)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}:\n{last['text']}") from None


def engine_pids(state_dir: Path) -> list[int]:
    """Processes started for this state dir (supervisors and engines) that are still alive."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if f"SERVE_CONSOLE_STATE_DIR={state_dir}".encode() in environ and int(proc.name) != os.getpid():
            pids.append(int(proc.name))
    return pids


def test_demo_in_tmux_shows_oom_line_and_card(tmp_path: Path) -> None:
    # Another demo on this machine may hold the demo's port: `--demo` then moves to a free one.
    tmux = Tmux(f"serve-console-test-{os.getpid()}")
    # -u: pytest may export COLUMNS/LINES, which would override the pane size inside tmux.
    env = f"-u COLUMNS -u LINES SERVE_CONSOLE_STATE_DIR={tmp_path} SERVE_CONSOLE_SIM_TIME_SCALE=0.02 TERM=xterm-256color"
    try:
        tmux("new-session", "-d", "-s", "console", "-x", "120", "-y", "40", f"env {env} {BIN} --demo; sleep 30")
        assert tmux("display", "-p", "-t", "console", "#{window_width}x#{window_height}").strip() == "120x40"
        tmux.wait_for("READY EP8")  # the demo brings EP8 up first
        tmux("send-keys", "-t", "console", "l")
        tmux.wait_for("layouts of kimi-k2.6", "OOM")
        tmux("send-keys", "-t", "console", "Down", "Down", "Down", "Enter")
        tmux.wait_for("will NOT load")
        tmux("send-keys", "-t", "console", "f")
        screen = tmux.wait_for("FAILED · CUDA OOM", "rollback EP8 READY", timeout_s=60)
        assert "· tried 672 MiB · " in screen  # the card's one-line headline
        tmux("send-keys", "-t", "console", "/")
        tmux.wait_for("filter: regex")  # the filter input is open (its placeholder shows) before we type
        tmux("send-keys", "-t", "console", "-l", "class:oom")
        tmux("send-keys", "-t", "console", "Enter")
        screen = tmux.wait_for("torch.OutOfMemoryError: CUDA out of memory", "tried 672.00 MiB free")
        assert " OOM TP" in screen
        tmux("send-keys", "-t", "console", "q")
        wait_until(lambda: not engine_pids(tmp_path), timeout_s=30, interval_s=0.2)
        assert engine_pids(tmp_path) == []  # quitting the demo left no engines behind
    finally:
        tmux("kill-server", check=False)
        for pid in engine_pids(tmp_path):  # a failed run must not leave engines behind either
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
