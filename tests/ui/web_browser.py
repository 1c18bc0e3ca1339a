"""A real Chromium in front of `serve-console web`: the server, headless browsers, the terminal's text and pixels.

Shared by tests/ui/test_web_browser.py and bench/web.py. Chromium is started here, not by ChromeDriver
(which attaches to it), so that every process this starts, the server, Chromium and ChromeDriver, gets a
signal from the kernel when the process that started it dies: a killed test run leaves nothing behind.

textual-serve's page draws the terminal with xterm.js on a canvas. Its Terminal object is not global, so
a script installed before the page's own (`TERMINAL_HOOK`) catches it as textual.js builds it, and the
tests read the terminal's buffer: the text on screen, and a cell's colours.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from waiting import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Headless, and nothing of Chromium's own reaching for a network this machine does not have.
CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--no-default-browser-check",
)  # fmt: skip
PR_SET_PDEATHSIG = 1

#: Runs before textual.js: the first object given a `fitAddon` is textual.js's terminal wrapper, and
#: it already holds the xterm.js Terminal (assigned just before).
TERMINAL_HOOK = r"""
(() => {
  const seen = [];
  Object.defineProperty(window, '__consoleTerminals', {value: seen});
  Object.defineProperty(Object.prototype, 'fitAddon', {
    configurable: true,
    set(value) {
      Object.defineProperty(this, 'fitAddon', {value, writable: true, configurable: true, enumerable: true});
      if (this.terminal) seen.push(this.terminal);
    },
  });
})();
"""

READ_SCREEN = r"""
const t = window.__consoleTerminals && window.__consoleTerminals[0];
if (!t) return null;
const rows = [];
for (let y = 0; y < t.rows; y++) {
  const line = t.buffer.active.getLine(y);
  rows.push(line ? line.translateToString(true) : '');
}
return rows.join('\n');
"""

#: [colour mode, colour] of the background of the first cell of `needle`, on a line after the one holding `after`.
CELL_BACKGROUND = r"""
const [needle, after] = arguments;
const t = window.__consoleTerminals && window.__consoleTerminals[0];
if (!t) return null;
let armed = !after;
for (let y = 0; y < t.rows; y++) {
  const line = t.buffer.active.getLine(y);
  if (!line) continue;
  let text = '';
  const xs = [];
  for (let x = 0; x < t.cols; x++) {
    const cell = line.getCell(x);
    if (!cell || cell.getWidth() === 0) continue;
    const chars = cell.getChars() || ' ';
    text += chars;
    for (let k = 0; k < chars.length; k++) xs.push(x);
  }
  if (!armed) { armed = text.includes(after); continue; }
  const i = text.indexOf(needle);
  if (i >= 0) { const cell = line.getCell(xs[i]); return [cell.getBgColorMode(), cell.getBgColor()]; }
}
return null;
"""

#: Distinct colours in a PNG (decoded by the browser itself) and the share of the commonest one.
PNG_COLOURS = r"""
const [b64, done] = arguments;
const img = new Image();
img.onload = () => {
  const canvas = document.createElement('canvas');
  canvas.width = img.width; canvas.height = img.height;
  const g = canvas.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, img.width, img.height).data;
  const counts = new Map();
  for (let i = 0; i < d.length; i += 4) {
    const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    counts.set(k, (counts.get(k) || 0) + 1);
  }
  done([counts.size, Math.max(...counts.values()) / (img.width * img.height)]);
};
img.onerror = () => done(null);
img.src = 'data:image/png;base64,' + b64;
"""


def missing() -> str | None:
    """Why a browser test cannot run here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (Debian's {package}; .ci/run installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the test extra: pip install -e '.[test]')"
    return None


def _end_with_parent(sig: int) -> None:
    """preexec_fn: the kernel sends `sig` to the child when the thread that started it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


class WebConsole:
    """`serve-console web --port 0` as a process: its URL with the token, its app processes, its output."""

    def __init__(self, *args: str, env: dict[str, str], timeout_s: float = 60.0) -> None:
        self.output: list[str] = []
        # SIGTERM on the test's death: the server ends its sessions and the demo's units the orderly way.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "web", "--port", "0", *args], cwd=REPO, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: _end_with_parent(signal.SIGTERM))  # fmt: skip
        self.url = ""
        ready = threading.Event()
        threading.Thread(target=self._read, args=(ready,), daemon=True).start()
        if not ready.wait(timeout_s) or not self.url:
            self.stop()
            raise AssertionError("serve-console web printed no URL:\n" + "".join(self.output))
        self.base = self.url.split("?", 1)[0]

    def _read(self, ready: threading.Event) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if not self.url and (found := re.search(r"^open: (\S+)", line)):
                self.url = found.group(1)
                ready.set()
        ready.set()

    def app_pids(self) -> list[int]:
        """The server's live app processes (one per browser session)."""
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (proc / "stat").read_text()
                fields = stat.rpartition(")")[2].split()
                cmd = (proc / "cmdline").read_bytes()
                if int(fields[1]) == self.proc.pid and fields[0] not in "ZX" and b"console.ui.web.visitor" in cmd:
                    pids.append(int(proc.name))
        return sorted(pids)

    def stop(self, timeout_s: float = 40.0) -> int | None:
        """SIGTERM (ends sessions, stops the demo's units), then SIGKILL to its group if it lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        return self.proc.returncode


class Browser:
    """One headless Chromium (its own user-data-dir), driven through ChromeDriver attached to it."""

    def __init__(self, user_data_dir: Path, *, width: int = 1400, height: int = 900) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        user_data_dir.mkdir(parents=True, exist_ok=True)
        self.user_data_dir = user_data_dir
        self.proc = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: _end_with_parent(signal.SIGKILL))  # fmt: skip
        self.driver = None
        try:
            options = webdriver.ChromeOptions()
            options.debugger_address = f"127.0.0.1:{self._devtools_port()}"
            service = Service(CHROMEDRIVER, popen_kw={"preexec_fn": lambda: _end_with_parent(signal.SIGKILL)})
            self.driver = webdriver.Chrome(service=service, options=options)
            self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TERMINAL_HOOK})
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout_s: float = 30.0) -> int:
        port_file = self.user_data_dir / "DevToolsActivePort"

        def port() -> int | None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(port_file.read_text().split()[0])
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited with {self.proc.returncode} before it listened")
            return None

        return wait_for(port, "chromium's DevToolsActivePort", timeout_s=timeout_s, interval_s=0.05)

    def open(self, url: str) -> None:
        self.driver.get(url)

    def page_text(self) -> str:
        return self.driver.execute_script("return document.body ? document.body.innerText : ''")

    def screen(self) -> str:
        """The terminal's text, row by row ('' before the terminal exists)."""
        return self.driver.execute_script(READ_SCREEN) or ""

    def wait_for(self, *needles: str, gone: tuple[str, ...] = (), timeout_s: float = 30.0) -> str:
        """The screen once it shows every needle and none of `gone`."""
        last = {"text": ""}

        def shown() -> str | None:
            last["text"] = text = self.screen()
            return text if all(n in text for n in needles) and not any(g in text for g in gone) else None

        try:
            return wait_for(shown, f"{needles!r} without {gone!r} on the screen", timeout_s=timeout_s, interval_s=0.05)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}:\n{last['text']}") from None

    def send(self, *keys: str) -> None:
        """Type into the terminal (xterm.js's input element), as a person at the keyboard."""
        self.driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
        self.driver.switch_to.active_element.send_keys(*keys)

    def background(self, needle: str, after: str | None = None) -> tuple[int, int] | None:
        found = self.driver.execute_script(CELL_BACKGROUND, needle, after)
        return tuple(found) if found else None

    def screenshot(self, path: Path) -> tuple[int, float]:
        """Save a PNG of the page; return its distinct colours and the share of its commonest colour."""
        png = self.driver.get_screenshot_as_base64()
        path.write_bytes(base64.b64decode(png))
        found = self.driver.execute_async_script(PNG_COLOURS, png)
        assert found is not None, "the browser could not decode its own screenshot"
        return int(found[0]), float(found[1])

    def close(self) -> None:
        if self.driver is not None:
            with contextlib.suppress(Exception):
                self.driver.quit()  # ChromeDriver only: it attached to this Chromium, it did not start it
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        shutil.rmtree(self.user_data_dir, ignore_errors=True)
