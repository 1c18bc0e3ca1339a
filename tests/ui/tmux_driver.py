"""Driving `serve-console` in a real terminal (tmux) for the tmux tests: the console's binary, a tmux
server of its own, the processes left for a state dir."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from waiting import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin" / "serve-console"


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
