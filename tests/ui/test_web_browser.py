"""`serve-console web --demo` in a real headless Chromium: the token, the keys, two sessions, read-only.

One server for the module (its own port, state dir and demo ports), browsers with their own
user-data-dirs; the server, its app processes, the demo's engines and the browsers are stopped at the
end, and die with the test process if it is killed (web_browser.py). Skipped with the reason where
Chromium, ChromeDriver or selenium is missing, unless SERVE_CONSOLE_REQUIRE_TESTBED=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from waiting import wait_until
from web_browser import Browser, WebConsole, missing

from console.ops.session_log import CLOSED, OPEN, SERVER_STOPPED, WebSessionLog

pytestmark = pytest.mark.slow
HOST_SCREEN = ("service kimi-k2.6", "journal · sglang-k26@", "read-only")


@pytest.fixture(scope="module")
def requires_chromium() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("SERVE_CONSOLE_REQUIRE_TESTBED") == "1":
        pytest.fail(f"a real Chromium is required (SERVE_CONSOLE_REQUIRE_TESTBED=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web-state")


@pytest.fixture(scope="module")
def server(requires_chromium, state: Path):
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(state), SERVE_CONSOLE_SIM_TIME_SCALE="0.02")
    for name in ("COLUMNS", "LINES"):  # pytest's terminal size must not fix the apps' size
        env.pop(name, None)
    web = WebConsole("--demo", "--max-sessions", "3", env=env)
    try:
        yield web
    finally:
        web.stop()
        _kill_engines(state)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory: pytest.TempPathFactory):
    one = Browser(tmp_path_factory.mktemp("chromium-a"))
    try:
        one.open(server.url)
        yield one
    finally:
        one.close()


def _kill_engines(state: Path) -> None:
    from sim_fixtures import engine_pids

    for pid in engine_pids(state):  # a failed run must not leave the demo's engines behind
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _sessions(state: Path):
    log = WebSessionLog(state / "audit.sqlite3")
    try:
        return log.sessions()
    finally:
        log.close()


def _outcomes(state: Path, pids: list[int]) -> dict[int | None, str]:
    return {s.app_pid: s.outcome for s in _sessions(state) if s.app_pid in pids}


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _wait(predicate, timeout_s: float = 30.0) -> bool:
    return wait_until(predicate, timeout_s=timeout_s, interval_s=0.1)


def test_without_the_token_every_request_is_401(server) -> None:
    ws_headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                  "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert _status(server.base) == 401
    assert _status(server.base + "static/js/textual.js") == 401
    assert _status(server.base + "ws?width=80&height=24", ws_headers) == 401
    assert _status(server.base + "?token=not-the-token") == 401
    assert server.app_pids() == []  # nothing started for any of them


def test_the_console_in_chromium_by_keys(server, browser, tmp_path: Path) -> None:
    screen = browser.wait_for(*HOST_SCREEN, "READY", timeout_s=60)
    cookie = next(c for c in browser.driver.get_cookies() if c["name"] == "serve_console_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "token=" not in browser.driver.current_url  # exchanged, and gone from the address bar
    # Read-only: the footer offers the layouts but no restart (S, b and x are never in the footer).
    assert "l Layouts" in screen and "Restart" not in screen

    browser.send("l")
    browser.wait_for("layouts of kimi-k2.6 on demo", "sglang-k26@tp4ep2.service")
    title = "layouts of kimi-k2.6"
    cursor = browser.background("sglang-k26@ep8.service", after=title)  # it starts on the running layout
    assert cursor is not None
    browser.send("\ue015")  # Down
    assert _wait(lambda: browser.background("sglang-k26@tp4ep2.service", after=title) == cursor, 10)
    assert browser.background("sglang-k26@ep8.service", after=title) != cursor
    browser.send("\ue013")  # Up
    assert _wait(lambda: browser.background("sglang-k26@ep8.service", after=title) == cursor, 10)
    browser.send("\ue00c")  # Escape
    browser.wait_for(*HOST_SCREEN, gone=(title,))

    browser.send("?")
    helped = browser.wait_for("read-only: changing actions are hidden", "host.layouts", "host.processes")
    for hidden in ("host.restart", "host.stop", "host.probe", "host.explore"):  # R, S, b, x
        assert hidden not in helped
    browser.send("\ue00c")
    browser.wait_for(*HOST_SCREEN, gone=("host.layouts",))

    colours, commonest = browser.screenshot(tmp_path / "console.png")
    assert colours >= 16 and commonest < 0.9, (colours, commonest)


def test_two_browsers_get_two_sessions(server, browser, state: Path, tmp_path: Path) -> None:
    browser.wait_for(*HOST_SCREEN)
    first = server.app_pids()
    assert len(first) == 1
    other = Browser(tmp_path / "chromium-b")
    try:
        other.open(server.base)
        assert "401 Unauthorized" in other.page_text()  # a browser without the token gets nothing
        other.open(server.url)
        other.wait_for(*HOST_SCREEN, timeout_s=60)
        assert _wait(lambda: len(server.app_pids()) == 2)
        both = server.app_pids()
        assert first[0] in both
        rows = [s for s in _sessions(state) if s.outcome == OPEN]
        assert sorted(s.app_pid for s in rows) == both and all(s.remote == "127.0.0.1" and s.readonly for s in rows)
        # Both watch the one demo the server runs, not a cluster each.
        assert "sglang-k26@ep8.service" in other.screen() and "sglang-k26@ep8.service" in browser.screen()
        other.open("about:blank")  # the tab leaves: its session ends, its app process exits
        assert _wait(lambda: server.app_pids() == first)
        assert _wait(lambda: _outcomes(state, both) == {first[0]: OPEN, **{p: CLOSED for p in both if p != first[0]}})
    finally:
        other.close()


def test_stopping_the_server_ends_every_session_and_the_demo(server, browser, state: Path) -> None:
    from sim_fixtures import engine_pids

    browser.wait_for(*HOST_SCREEN)
    apps = server.app_pids()
    assert apps and engine_pids(state)
    assert server.stop() == 0
    assert server.app_pids() == [] and not any(Path(f"/proc/{pid}").exists() for pid in apps)
    assert _wait(lambda: engine_pids(state) == [], 10)  # the units the server's demo started are stopped
    ended = next(s for s in _sessions(state) if s.app_pid == apps[0])
    assert ended.outcome == SERVER_STOPPED and ended.ended_at is not None
    lines = [json.dumps(s.to_json()) for s in _sessions(state)]
    assert all('"event": "web_session"' in line for line in lines)
