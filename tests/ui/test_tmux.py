"""A real terminal: `serve-console --demo` in tmux, the switch by keys, the OOM found on the screen."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import pytest
from tmux_driver import BIN, Tmux, engine_pids
from waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


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
