"""Benchmark of the console's own noise: probe lines per minute in an idle engine's journal.

A headless `switch EP8` brings the demo's EP8 up, then the console (`serve-console --config console/sim/demo.toml`,
the demo's hosts as written) runs in a pseudo-terminal (120x40) on the demo host's screen (Enter on the fleet's first row where the demo has several hosts);
once it has settled, the engine's access lines are counted over a window of idle time, by path. The console's
probes are the only clients, so every access line is one of its own. Each source tree named is run in
turn: the first is the named baseline, and the ratios are against it.

Run: .venv/bin/python bench/probe_lines.py [--window-s 60] [--baseline-src DIR] [SRC ...]
`--baseline-src` is a source tree of an earlier commit, e.g. made with
`git archive 62effb6 | tar -x -C /tmp/sc-before`. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UNIT = "sglang-k26@ep8.service"
READY_LINE = "The server is fired up and ready to roll!"
ACCESS = re.compile(r'"(?:GET|POST|HEAD) (?P<path>[^ ?"]+)')


def _drain(master: int, stop: threading.Event, seen: bytearray) -> None:
    while not stop.is_set():
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                return
            del seen[:-200_000]


def _console(src: Path, env: dict, *args: str, timeout_s: float = 120.0) -> None:
    subprocess.run([sys.executable, "-m", "console", "--config", "console/sim/demo.toml", *args], cwd=src,
                   env=env, check=True, timeout=timeout_s, capture_output=True)


_STOP_ALL = (
    "import asyncio\nfrom console.config import load_config\nfrom console.factory import open_host\n"
    "async def main():\n    host = open_host(load_config('console/sim/demo.toml').host('demo'))\n"
    "    await host.services.stop_all()\n    await host.close()\nasyncio.run(main())\n"
)


def _entries(journal: Path) -> list[dict]:
    if not journal.exists():
        return []
    out = []
    for raw in journal.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def measure(src: Path, window_s: float, settle_s: float = 5.0, timeout_s: float = 120.0) -> dict:
    """Probe lines per minute, by path, in the idle journal of the demo run from source tree `src`."""
    import fcntl
    import termios

    with tempfile.TemporaryDirectory(prefix="sc-probe-bench-") as state:
        journal = Path(state) / "hosts" / "demo" / "units" / UNIT / "journal.jsonl"
        env = dict(os.environ, TERM="xterm-256color", SERVE_CONSOLE_STATE_DIR=state, PYTHONPATH=str(src),
                   SERVE_CONSOLE_SIM_TIME_SCALE="0.05", SERVE_CONSOLE_PORT_LOCK_DIR=state)
        _console(src, env, "switch", "EP8", "--host", "demo")
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        proc = subprocess.Popen([sys.executable, "-m", "console", "--config", "console/sim/demo.toml"], stdin=slave, stdout=slave,
                                stderr=slave, env=env, cwd=src, close_fds=True, start_new_session=True)
        os.close(slave)
        stop, seen = threading.Event(), bytearray()
        drain = threading.Thread(target=_drain, args=(master, stop, seen), daemon=True)
        drain.start()
        try:
            time.sleep(4.0)
            if b"fleet" in seen and b"journal" not in seen:
                os.write(master, b"\r")  # open the demo host, the fleet's first row
            deadline = time.monotonic() + timeout_s
            ready_ts = None
            while ready_ts is None and time.monotonic() < deadline:
                ready_ts = next((e["ts"] for e in _entries(journal) if READY_LINE in e.get("msg", "")), None)
                time.sleep(0.2)
            if ready_ts is None:
                raise SystemExit(f"{src}: EP8 never got ready within {timeout_s:g} s")
            start = time.time() + settle_s
            time.sleep(settle_s + window_s)
            end = start + window_s
            paths = Counter(
                m["path"] for e in _entries(journal) if start <= e["ts"] < end and (m := ACCESS.search(e.get("msg", "")))
            )
        finally:
            os.write(master, b"q")
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            stop.set()
            drain.join(timeout=2)
            os.close(master)
            subprocess.run([sys.executable, "-c", _STOP_ALL], cwd=src, env=env, timeout=60, check=False)
    per_min = {path: round(n * 60 / window_s, 1) for path, n in sorted(paths.items())}
    return {"src": str(src), "window_s": window_s, "per_min": per_min, "total_per_min": round(sum(paths.values()) * 60 / window_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--baseline-src", type=Path, help="source tree of the baseline commit")
    parser.add_argument("src", nargs="*", type=Path, help="source trees to compare (default: this repo)")
    args = parser.parse_args()
    trees = ([args.baseline_src] if args.baseline_src else []) + (args.src or [REPO])
    results = [measure(t.resolve(), args.window_s) for t in trees]
    base = results[0]["total_per_min"]
    for r in results:
        ratio = f"{r['total_per_min'] / base:.3f}x baseline" if base else "baseline 0"
        print(f"{r['src']}: {r['total_per_min']} probe lines/min {r['per_min']} ({ratio})")
    print(json.dumps({"bench": "probe_lines", "baseline": results[0]["src"], "results": results}))


if __name__ == "__main__":
    main()
