"""Benchmark of the console's TUI.

1. Time to first frame, cold: `serve-console --demo` in a pseudo-terminal (120x40), from spawn to the
   host screen's first paint.
2. Journal ingest into the pane while it is on screen, lines/s, against Textual's stock `Log` widget
   fed the same lines in the same run, with the ratio.
3. Key-to-repaint latency while a unit writes 20,000 lines/s into the journal pane.
4. Peak RSS with 8 hosts open and 100k lines buffered in each host's journal.

Run: .venv/bin/python bench/tui.py [--quick]. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import pty
import resource
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "ui"))  # the fixed-data hosts the snapshot tests use

SAMPLE_LINES = [
    "[2026-05-26 00:06:20 TP{r} EP{r}] Decode batch. #running-req: 12, #token: 40961, token usage: 0.41, "
    "gen throughput (token/s): 812.33, #queue-req: 0, n={n}",
    "[2026-05-26 00:06:20] INFO:     127.0.0.1:40312 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK n={n}",
    "[2026-05-26 00:06:20 TP{r} EP{r}] Prefill batch. #new-seq: 1, #new-token: 8, #cached-token: 0, n={n}",
    "[2026-05-26 00:06:21 TP{r}] NCCL WARN Call to bind failed: Address already in use n={n}",
]


def make_lines(count: int) -> list[str]:
    return [SAMPLE_LINES[n % len(SAMPLE_LINES)].format(r=n % 8, n=n) for n in range(count)]


# -- 1. first frame ------------------------------------------------------------------------------------
def first_frame_s(state_dir: str, timeout_s: float = 30.0) -> dict[str, float]:
    """Spawn the demo in a pty; time the first output and the host screen's first paint."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", SERVE_CONSOLE_STATE_DIR=state_dir,
               SERVE_CONSOLE_DEMO_NO_START="1", COLUMNS="120", LINES="40")
    t0 = time.monotonic()
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "serve-console"), "--demo"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True, start_new_session=True)
    os.close(slave)
    out = b""
    first_byte = painted = None
    try:
        while time.monotonic() - t0 < timeout_s and painted is None:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if chunk and first_byte is None:
                first_byte = time.monotonic() - t0
            out += chunk
            if b"GPU memory" in out and b"journal" in out:
                painted = time.monotonic() - t0
        os.write(master, b"q")
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return {"first_output_s": round(first_byte or -1, 3), "first_frame_s": round(painted or -1, 3)}


# -- 2. ingest vs Log ------------------------------------------------------------------------------------
async def ingest_rates(total: int, batch: int, cap: int, rounds: int = 3) -> dict[str, float]:
    from textual.app import App, ComposeResult
    from textual.containers import Horizontal
    from textual.widgets import Log

    from console.domain.triage.triager import Triager
    from console.domain.values import Engine
    from console.ui.widgets.journal_view import JournalView

    lines = make_lines(total)

    class Side(App[None]):
        def compose(self) -> ComposeResult:
            with Horizontal():
                yield JournalView(line_cap=cap)
                yield Log(max_lines=cap)

    async def feed(push) -> float:
        t0 = time.perf_counter()
        for i in range(0, total, batch):
            push(lines[i : i + batch])
            await asyncio.sleep(0)  # let frames through, as the pane's flush timer does
        await pilot.pause()  # the last frame
        return total / (time.perf_counter() - t0)

    app = Side()
    runs: dict[str, list[float]] = {"view": [], "triage": [], "log": []}
    async with app.run_test(size=(120, 40)) as pilot:
        view, log = app.query_one(JournalView), app.query_one(Log)
        triager = Triager(Engine.SGLANG)

        def triaged(chunk: list[str]) -> None:
            items = []
            for text in chunk:
                found = triager.feed(text, None)
                items.append((text, "u", None, found[-1] if found else None))
            view.append_batch(items)

        for _ in range(rounds):  # interleaved rounds: the machine's noise hits all three alike
            view.clear()
            runs["view"].append(await feed(lambda chunk: view.append_batch([(t, "u", None, None) for t in chunk])))
            view.clear()
            runs["triage"].append(await feed(triaged))
            log.clear()
            runs["log"].append(await feed(log.write_lines))
        stored = view.line_count, log.line_count
    view_only, with_triage, stock = (statistics.median(runs[k]) for k in ("view", "triage", "log"))
    return {"pane_lines_per_s": round(view_only), "pane_with_triage_lines_per_s": round(with_triage),
            "log_lines_per_s": round(stock), "ratio_pane_vs_log": round(view_only / stock, 2),
            "ratio_pane_with_triage_vs_log": round(with_triage / stock, 2), "stored": list(stored),
            "lines_per_round": total, "rounds": rounds}


# -- 3. key latency under a flood -------------------------------------------------------------------------
class FloodServices:
    """A unit that writes `rate` lines/s forever (wraps a fixed host's services)."""

    def __init__(self, inner, rate: int) -> None:
        self.inner = inner
        self.rate = rate
        self.sent = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def journal(self, unit: str, **_kw: object):
        from console.domain.values import JournalEntry

        t0 = time.monotonic()
        while True:
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                n = self.sent
                yield JournalEntry(str(n), time.time(), unit, SAMPLE_LINES[n % 3].format(r=n % 8, n=n))
                self.sent += 1
            await asyncio.sleep(0.002)


async def key_latency(rate: int, presses: int) -> dict[str, float]:
    from fixed_host import fixed_app
    from textual import events

    from console.ui.widgets.gpu_pane import GpuPane

    app = fixed_app({"demo": "ep8"})
    host = app.hosts["demo"]
    flood = FloodServices(host.services, rate)
    host.services = flood
    frames: list[float] = []
    original_display = app._display

    frame_seen = asyncio.Event()

    def display(screen, renderable) -> None:
        if renderable is not None:
            frames.append(time.perf_counter())
            frame_seen.set()
        original_display(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    latencies: list[float] = []
    async with app.run_test(size=(120, 40)):
        for _ in range(100):
            await asyncio.sleep(0.05)
            if app.screen.query("#gpu-pane"):
                break
        pane = app.screen.query_one(GpuPane)
        journal = app.screen.query_one("#journal-pane")
        await asyncio.sleep(1.0)  # let the flood run
        t_start, sent0, frames0 = time.perf_counter(), flood.sent, len(frames)
        toggles: list[float] = []
        original_toggle = pane.toggle_processes

        toggled = asyncio.Event()

        def toggle() -> None:
            toggles.append(time.perf_counter())
            toggled.set()
            original_toggle()

        pane.toggle_processes = toggle  # type: ignore[method-assign]
        gc_pauses = GcPauseMeter()
        gc.callbacks.append(gc_pauses.callback)
        for n in range(presses):
            key = events.Key("p", "p")
            key.set_sender(app)
            toggled.clear()
            t0 = time.perf_counter()
            app._driver.send_message(key)  # as the terminal driver does: no waiting for idle
            await toggled.wait()
            frame_seen.clear()
            if frames[-1] < toggles[n]:
                await frame_seen.wait()
            painted = next(f for f in frames if f >= toggles[n])
            latencies.append(painted - t0)
            await asyncio.sleep(0.1)
        elapsed = time.perf_counter() - t_start
        gc.callbacks.remove(gc_pauses.callback)
        stored = journal.view.line_count
    latencies.sort()
    return {"rate_target_lines_per_s": rate, "rate_achieved_lines_per_s": round((flood.sent - sent0) / elapsed),
            "frames_per_s": round((len(frames) - frames0) / elapsed, 1),
            "key_to_repaint_ms_median": round(statistics.median(latencies) * 1000, 1),
            "key_to_repaint_ms_max": round(latencies[-1] * 1000, 1), "lines_stored": stored,
            "gc_full_passes": gc_pauses.full_passes, "gc_pause_ms_max": round(gc_pauses.longest_s * 1000, 1)}


class GcPauseMeter:
    """The collector's passes while keys are measured: how many full ones, and the longest pass."""

    def __init__(self) -> None:
        self.started = 0.0
        self.full_passes = 0
        self.longest_s = 0.0

    def callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        self.longest_s = max(self.longest_s, time.perf_counter() - self.started)
        self.full_passes += info.get("generation") == 2


# -- 4. RSS --------------------------------------------------------------------------------------------------
async def rss_with_hosts(hosts: int, lines: int) -> dict[str, float]:
    import dataclasses

    from fixed_host import fixed_app

    names = {f"gpu-node-{i + 1}": "ep8" for i in range(hosts)}
    app = fixed_app(names)
    app.config = dataclasses.replace(app.config, ui=dataclasses.replace(app.config.ui, line_cap=lines))
    app.ui_config = app.config.ui
    texts = make_lines(lines)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with app.run_test(size=(120, 40)) as pilot:
        for name in names:
            app.open_host(name)
            for _ in range(100):
                await pilot.pause(0.02)
                if app.screen.query("#journal-pane"):
                    break
            view = app.screen.query_one("#journal-pane").view
            for i in range(0, lines, 5000):
                view.append_batch([(t, "u.service", None, None) for t in texts[i : i + 5000]])
            await pilot.pause()
        total = sum(app.host_screen(n).query_one("#journal-pane").view.line_count for n in names)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"hosts": hosts, "lines_buffered_per_host": lines, "lines_buffered_total": total,
            "peak_rss_mib": round(peak / 1024, 1), "rss_before_app_mib": round(base / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (for a smoke check)")
    parser.add_argument("--part", choices=["frame", "ingest", "latency", "rss"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:  # each part runs in its own process, so RSS and cold start are its own
        result = {
            "frame": lambda: first_frame_s(tempfile.mkdtemp(prefix="serve-console-bench-")),
            "ingest": lambda: asyncio.run(ingest_rates(100_000 if args.quick else 400_000, 1000, 50_000)),
            "latency": lambda: asyncio.run(key_latency(20_000, 5 if args.quick else 20)),
            "rss": lambda: asyncio.run(rss_with_hosts(8, 20_000 if args.quick else 100_000)),
        }[args.part]()
        print(json.dumps(result))
        return 0
    figures: dict[str, object] = {}
    for part in ("frame", "ingest", "latency", "rss"):
        cmd = [sys.executable, __file__, "--part", part] + (["--quick"] if args.quick else [])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        lines = done.stdout.strip().splitlines()
        try:
            figures[part] = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            figures[part] = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    f, i, k, r = (figures[p] for p in ("frame", "ingest", "latency", "rss"))
    print(f"time to first frame (cold, --demo, pty 120x40): {f.get('first_frame_s')} s"
          f" (first output {f.get('first_output_s')} s)")
    print(f"journal ingest on screen: pane {i.get('pane_lines_per_s')} lines/s, pane+triage "
          f"{i.get('pane_with_triage_lines_per_s')} lines/s, stock Log {i.get('log_lines_per_s')} lines/s;"
          f" ratio pane/Log {i.get('ratio_pane_vs_log')}x, pane+triage/Log {i.get('ratio_pane_with_triage_vs_log')}x")
    print(f"key-to-repaint under {k.get('rate_target_lines_per_s')} lines/s (achieved "
          f"{k.get('rate_achieved_lines_per_s')}): median {k.get('key_to_repaint_ms_median')} ms, max "
          f"{k.get('key_to_repaint_ms_max')} ms, {k.get('frames_per_s')} frames/s; GC: {k.get('gc_full_passes')}"
          f" full passes, longest pass {k.get('gc_pause_ms_max')} ms")
    print(f"peak RSS with {r.get('hosts')} hosts and {r.get('lines_buffered_per_host')} lines each: "
          f"{r.get('peak_rss_mib')} MiB")
    print(json.dumps({"bench": "tui", **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
