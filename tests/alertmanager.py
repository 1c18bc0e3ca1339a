"""A real Alertmanager (Debian's `prometheus-alertmanager`) for the watch daemon's tests and bench/alert_latency.py.

It runs on a free loopback port with a temporary storage path and no cluster gossip
(`--cluster.listen-address=`), never as the system service. Its one route sends every alert to a
`Capture` webhook (group_wait 0 s, group_interval 1 s, resolved notifications on), so a test can read
both what Alertmanager holds (`GET /api/v2/alerts`, or `amtool`) and what it notified. The tests may stop
it and start it again on the same port (Alertmanager down, then up); it keeps alerts in memory only, so
a restarted one knows only what the daemon sends it again. It dies with the process that started it,
even one killed with -9 (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ports import free_port
from waiting import WaitTimeout, wait_for

BINARY = "prometheus-alertmanager"
AMTOOL = "amtool"


def missing_reason() -> str | None:
    """Why the real-Alertmanager tests cannot run here, or None when they can."""
    missing = [b for b in (BINARY, AMTOOL) if shutil.which(b) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian: apt-get install prometheus-alertmanager)"
    return None


class Capture:
    """A webhook receiver on a free loopback port: every JSON body POSTed to it, in order."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                with capture.lock:
                    capture.bodies.append({"path": self.path, "body": body,
                                           "authorization": self.headers.get("Authorization")})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self, path: str | None = None) -> list[dict[str, Any]]:
        """Every alert of every body received (at `path`), in order."""
        with self.lock:
            return [a for b in self.bodies if path is None or b["path"] == path for a in b["body"]["alerts"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Alertmanager:
    """One Alertmanager on its own port and storage path, stopped and started at will."""

    def __init__(self, work_dir: Path, notify_url: str) -> None:
        self.work_dir = work_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = work_dir / "alertmanager.yml"
        self.config.write_text(
            "route:\n  receiver: capture\n  group_by: ['alertname', 'host', 'service', 'unit']\n"
            "  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n"
            f"receivers:\n  - name: capture\n    webhook_configs:\n      - url: {notify_url}/notify\n"
            "        send_resolved: true\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = (self.work_dir / "alertmanager.log").open("ab")
        self.proc = subprocess.Popen(
            [BINARY, f"--config.file={self.config}", f"--storage.path={self.work_dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            env={**os.environ, "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2")})
        log.close()
        proc = self.proc

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited {proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as resp:
                    return resp.status == 200
            return False

        try:
            wait_for(ready, "alertmanager's /-/ready", timeout_s=timeout_s, interval_s=0.05)
        except WaitTimeout as exc:
            raise RuntimeError(f"{exc}: {self.log_tail()}") from None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return " | ".join((self.work_dir / "alertmanager.log").read_text().strip().splitlines()[-5:])
        return "(no log)"

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """What Alertmanager holds now (`GET /api/v2/alerts`: the unresolved ones), filtered by labels."""
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=5) as resp:
            found = json.loads(resp.read())
        return [a for a in found if all(a["labels"].get(k) == v for k, v in labels.items())]

    def amtool(self, *matchers: str) -> list[dict[str, Any]]:
        """The same through `amtool alert query -o json MATCHER...`."""
        out = subprocess.run([AMTOOL, f"--alertmanager.url={self.url}", "alert", "query", "-o", "json", *matchers],
                             capture_output=True, text=True, timeout=30, check=True)
        return json.loads(out.stdout or "[]")


@pytest.fixture(scope="session")
def alertmanager_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Alertmanager, Capture]]:
    """(a running Alertmanager, the webhook its route notifies), once per test session.

    Skips with the reason where the binaries are missing; fails instead under SERVE_CONSOLE_REQUIRE_TESTBED=1.
    """
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("SERVE_CONSOLE_REQUIRE_TESTBED") == "1":
            pytest.fail(f"a real Alertmanager is required (SERVE_CONSOLE_REQUIRE_TESTBED=1): {reason}")
        pytest.skip(reason)
    capture = Capture()
    server = Alertmanager(tmp_path_factory.mktemp("alertmanager"), capture.url)
    server.start()
    try:
        yield server, capture
    finally:
        server.stop()
        capture.close()


@pytest.fixture
def alertmanager(alertmanager_session: tuple[Alertmanager, Capture]) -> Iterator[tuple[Alertmanager, Capture]]:
    """The session's Alertmanager, running (a test that stopped it leaves it started again)."""
    server, capture = alertmanager_session
    server.start()
    yield server, capture
    server.start()
