"""Benchmark of the web console against the same console in tmux.

1. Time to first paint: from navigation in headless Chromium (a new page, so a new session and app
   process) to the host screen's text drawn on the terminal's canvas; against tmux, from spawning
   `serve-console` in a new tmux session to the same text on tmux's screen.
2. Key round trip: `?` (the help screen) from the key down in the page to the help's text drawn;
   against tmux, from `tmux send-keys ?` to the help's text on tmux's screen.

Both consoles open the same config (one simulated host, nothing running, read-only) at the same size.
The page is timed by the page itself (performance.now() at keydown and at xterm.js's render that first
shows the text); tmux by polling `capture-pane` (a few ms per poll, which favours neither much).

Run: .venv/bin/python bench/web.py [--runs 5] [--keys 10]. Needs Debian's chromium, chromium-driver
and tmux. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "ui"))  # the browser harness the web test uses

from web_browser import Browser, WebConsole, missing  # noqa: E402

HOST_SCREEN = "service kimi-k2.6"
HELP = "host.layouts"
CONFIG = """
[hosts.demo]
transport = "sim"
gpus = "sim"

[hosts.demo.sim]
gpu_count = 8
gpu_total_mib = 97887
gpu_name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

[hosts.demo.services."kimi-k2.6"]
engine = "sglang"
url = "http://127.0.0.1:{port}"
mapping = "template"
template = "sglang-k26@.service"
model_config = "{models}/moonshotai--Kimi-K2.6.json"
layouts = ["TP8", "PP8", "EP8", "TP4 EP2"]
"""

#: Installed before the page's scripts: marks the time of each key down, and of the first render that
#: shows (or no longer shows) what `window.__benchWant` names. The first paint is wanted from the start.
PAGE_CLOCK = r"""
(() => {
  const marks = {};
  window.__benchMarks = marks;
  window.__benchWant = {needle: __NEEDLE__, gone: false, name: 'paint'};
  document.addEventListener('keydown', () => { marks.keydown = performance.now(); }, true);
  const hook = setInterval(() => {
    const t = window.__consoleTerminals && window.__consoleTerminals[0];
    if (!t) return;
    clearInterval(hook);
    t.onRender(() => {
      const want = window.__benchWant;
      if (!want) return;
      let text = '';
      for (let y = 0; y < t.rows; y++) {
        const line = t.buffer.active.getLine(y);
        text += (line ? line.translateToString(true) : '') + '\n';
      }
      if (text.includes(want.needle) !== want.gone) {
        marks[want.name] = performance.now();
        window.__benchWant = null;
      }
    });
  }, 1);
})();
""".replace("__NEEDLE__", json.dumps(HOST_SCREEN))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _mark(browser: Browser, name: str, timeout_s: float = 30.0) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = browser.driver.execute_script(f"return window.__benchMarks && window.__benchMarks.{name}")
        if value is not None:
            return float(value)
        time.sleep(0.01)
    raise SystemExit(f"bench/web.py: the page never showed {name}:\n{browser.screen()}")


def _want(browser: Browser, needle: str, name: str, gone: bool = False) -> None:
    browser.driver.execute_script("window.__benchWant = arguments[0]", {"needle": needle, "gone": gone, "name": name})


def web_runs(web: WebConsole, browser: Browser, runs: int, keys: int) -> tuple[list[float], list[float], tuple[int, int]]:
    """First paints (s) and key round trips (ms) in Chromium; the terminal's size."""
    browser.open(web.url)  # the token, once: later pages carry the cookie
    paints, pages = [], []
    for _ in range(runs):
        browser.open("about:blank")  # the last page's session ends; wait until its app has exited
        deadline = time.monotonic() + 30
        while web.app_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        browser.open(web.base)
        paints.append(_mark(browser, "paint") / 1000)
        pages.append(browser.driver.execute_script(
            "return performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
    size = tuple(browser.driver.execute_script("const t = window.__consoleTerminals[0]; return [t.cols, t.rows]"))
    time.sleep(1.0)  # the host screen's first polls settle
    trips = []
    for _ in range(keys):
        _want(browser, HELP, "help")
        browser.send("?")
        trips.append(_mark(browser, "help") - _mark(browser, "keydown"))
        _want(browser, HELP, "closed", gone=True)
        browser.send("\ue00c")  # Escape
        _mark(browser, "closed")
        browser.driver.execute_script("delete window.__benchMarks.help; delete window.__benchMarks.closed")
    print(f"web: the page itself (HTML, textual.js, xterm.js) loaded after a median {statistics.median(pages):.3f} s; "
          "the rest of the first paint is the websocket, the app process's start and its first frame")
    return paints, trips, size


def tmux_runs(config: Path, env: dict[str, str], size: tuple[int, int], runs: int, keys: int) -> tuple[list[float], list[float]]:
    """The same in tmux: spawn to host screen (s), send-keys to help on screen (ms)."""
    sock = f"serve-console-bench-{os.getpid()}-{time.monotonic_ns()}"

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], capture_output=True, text=True,
                              timeout=10).stdout

    def until(needle: str, gone: bool = False, timeout_s: float = 30.0) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (needle in tmux("capture-pane", "-p", "-t", "bench")) != gone:
                return time.monotonic()
        raise SystemExit(f"bench/web.py: tmux never showed {needle!r}")

    env_args = " ".join(f"{k}={v}" for k, v in env.items())
    command = f"env -u COLUMNS -u LINES {env_args} TERM=xterm-256color {sys.executable} -m console --config {config} --readonly"
    paints, trips = [], []
    try:
        for run in range(runs):
            start = time.monotonic()
            tmux("new-session", "-d", "-s", "bench", "-x", str(size[0]), "-y", str(size[1]), command)
            paints.append(until(HOST_SCREEN) - start)
            if run < runs - 1:
                tmux("kill-server")
                time.sleep(1.0)  # the console exits on SIGHUP
        time.sleep(1.0)
        for _ in range(keys):
            start = time.monotonic()
            tmux("send-keys", "-t", "bench", "?")
            trips.append((until(HELP) - start) * 1000)
            tmux("send-keys", "-t", "bench", "Escape")
            until(HELP, gone=True)
    finally:
        tmux("kill-server")
    return paints, trips


def _row(name: str, web: list[float], term: list[float], unit: str) -> dict[str, float]:
    w, t = statistics.median(web), statistics.median(term)
    print(f"{name:<26} web {w:8.3f} {unit} (min {min(web):.3f}, max {max(web):.3f})   "
          f"tmux {t:8.3f} {unit} (min {min(term):.3f}, max {max(term):.3f})   web/tmux {w / t:5.2f}x")
    return {"web": round(w, 4), "tmux": round(t, 4), "ratio": round(w / t, 2),
            "web_runs": [round(v, 4) for v in web], "tmux_runs": [round(v, 4) for v in term]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="first paints each way")
    parser.add_argument("--keys", type=int, default=10, help="key round trips each way")
    args = parser.parse_args()
    reason = missing() or (None if subprocess.run(["which", "tmux"], capture_output=True).returncode == 0 else "no tmux")
    if reason:
        raise SystemExit(f"bench/web.py: {reason}")
    with tempfile.TemporaryDirectory(prefix="serve-console-bench-web-") as tmp:
        root = Path(tmp)
        config = root / "hosts.toml"
        config.write_text(CONFIG.format(port=_free_port(), models=REPO / "console" / "sim" / "models"))
        env = {"SERVE_CONSOLE_STATE_DIR": str(root / "state")}
        (root / "state").mkdir()
        web = WebConsole("--config", str(config), env={**os.environ, **env})
        browser = Browser(root / "chromium")
        try:
            browser.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PAGE_CLOCK})
            web_paints, web_trips, size = web_runs(web, browser, args.runs, args.keys)
        finally:
            browser.close()
            web.stop()
        term_paints, term_trips = tmux_runs(config, env, size, args.runs, args.keys)
    print(f"terminal {size[0]}x{size[1]}, {args.runs} first paints and {args.keys} key round trips each way")
    paint = _row("first paint (host screen)", web_paints, term_paints, "s ")
    key = _row("key round trip (? help)", web_trips, term_trips, "ms")
    print(json.dumps({"bench": "web", "baseline": "the same console in tmux", "size": list(size),
                      "first_paint_s": paint, "key_round_trip_ms": key}))


if __name__ == "__main__":
    main()
