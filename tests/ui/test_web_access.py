"""Who may reach `serve-console web`: the token, the cookie, the headers, and the options that guard a bind."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from waiting import await_for
from web_fakes import TOKEN, stand_in_server

from console.cli import main
from console.errors import UsageError
from console.ui.web.access import COOKIE, COOKIE_MAX_AGE_S, AccessGate, is_loopback, read_token_file


@pytest.fixture
async def client(tmp_path: Path):
    server = stand_in_server(tmp_path)
    async with TestClient(TestServer(await server.make_app())) as web:
        web.server_under_test = server
        yield web
    await server.end_sessions()
    server.log.close()


async def _log_in(client: TestClient) -> None:
    answer = await client.get(f"/?token={TOKEN}", allow_redirects=False)
    assert answer.status == 303


@pytest.mark.parametrize("path", ["/", "/static/js/textual.js", "/ws", "/download/some-key", "/?token=wrong"])
async def test_without_the_cookie_every_path_is_401(client: TestClient, path: str) -> None:
    answer = await client.get(path, allow_redirects=False)
    assert answer.status == 401
    assert "?token=" in await answer.text() and COOKIE not in answer.headers.get("Set-Cookie", "")


async def test_the_token_is_exchanged_for_a_private_cookie_and_leaves_the_address(client: TestClient) -> None:
    answer = await client.get(f"/?token={TOKEN}&fontsize=12", allow_redirects=False)
    assert answer.status == 303 and answer.headers["Location"] == "/?fontsize=12"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}=") and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    page = await client.get("/?fontsize=12")
    assert page.status == 200
    html = await page.text()
    assert f'data-session-websocket-url="ws://{client.host}:{client.port}/ws"' in html  # from the request
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["Cache-Control"] == "no-store" and page.headers["Referrer-Policy"] == "no-referrer"
    assert (await client.get("/static/js/textual.js")).status == 200


async def test_every_browser_gets_its_own_cookie(client: TestClient) -> None:
    first = (await client.get(f"/?token={TOKEN}", allow_redirects=False)).cookies[COOKIE].value
    second = (await client.get(f"/?token={TOKEN}", allow_redirects=False)).cookies[COOKIE].value
    assert first != second


async def test_a_websocket_opened_by_another_sites_page_is_refused(client: TestClient) -> None:
    await _log_in(client)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
    assert refused.value.status == 403
    assert client.server_under_test.sessions == set()  # nothing started for it


async def test_a_websocket_from_the_page_starts_a_session(client: TestClient) -> None:
    await _log_in(client)
    ws = await client.ws_connect("/ws?width=100&height=30", headers={"Origin": f"http://{client.host}:{client.port}"})
    assert len(client.server_under_test.sessions) == 1
    await ws.close()


def _token_file(tmp_path: Path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def test_a_token_file_must_be_private_long_and_one_line(tmp_path: Path) -> None:
    good = "x" * 40
    assert read_token_file(_token_file(tmp_path, good + "\n")) == good
    with pytest.raises(UsageError, match="mode 0644 lets others read it; chmod 600"):
        read_token_file(_token_file(tmp_path, good, 0o644))
    with pytest.raises(UsageError, match="at least 24"):
        read_token_file(_token_file(tmp_path, "short"))
    with pytest.raises(UsageError, match="without spaces"):
        read_token_file(_token_file(tmp_path, "x" * 30 + "\n" + "y" * 30))
    os.symlink(tmp_path / "token", tmp_path / "link")
    with pytest.raises(UsageError, match="token file .*link"):
        read_token_file(str(tmp_path / "link"))
    with pytest.raises(UsageError, match="No such file"):
        read_token_file(str(tmp_path / "none"))


def test_loopback_is_only_this_machine() -> None:
    assert all(is_loopback(a) for a in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(a) for a in ("0.0.0.0", "::", "10.0.0.5", "gpu-admin-host"))


@pytest.mark.parametrize(("argv", "says"), [
    (["web", "--bind", "0.0.0.0"], "--bind 0.0.0.0 reaches other machines over plain HTTP: give --token-file"),
    (["web", "--max-sessions", "0"], "--max-sessions 0: at least 1"),
    (["web", "--idle-minutes", "0"], "--idle-minutes 0: a number of minutes above 0"),
    (["web", "--idle-minutes", "nan"], "--idle-minutes nan"),
    (["web", "--port", "70000"], "--port 70000"),
    (["web", "--demo", "--theme", "sepia"], "unknown theme 'sepia'"),
])  # fmt: skip
def test_options_that_cannot_work_are_one_line_and_exit_2(argv: list[str], says: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_actions_are_refused_where_the_console_is_read_only(capsys) -> None:
    assert main(["--readonly", "web", "--demo", "--allow-actions"]) == 1
    assert "read-only mode (--readonly): refusing to let web visitors change hosts" in capsys.readouterr().err


def test_a_port_in_use_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    import socket

    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    from console.config import demo_config_path

    config = demo_config_path()  # as a plain config: no demo ports reserved, nothing started
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["--config", str(config), "web", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "choose another --port" in err and "Traceback" not in err


def test_a_bind_beyond_loopback_warns_before_it_listens(tmp_path: Path, monkeypatch, capsys) -> None:
    from console.config import demo_config_path

    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    token = _token_file(tmp_path, "t" * 32)
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the warning comes, then the bind fails.
    argv = ["--config", str(demo_config_path()), "web", "--bind", "192.0.2.1", "--port", "0", "--token-file", token]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "warning: --bind 192.0.2.1 serves the console to other machines over plain HTTP" in err
    assert "cannot listen on 192.0.2.1:0" in err


def test_a_token_from_a_file_is_never_printed_and_opens_the_console(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    from web_browser import WebConsole

    from console.config import demo_config_path

    secret = "s" * 40
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path))
    web = WebConsole("--config", str(demo_config_path()), "--token-file", _token_file(tmp_path, secret), env=env)
    try:
        assert f"?token=<the token in {tmp_path / 'token'}>" in "".join(web.output)
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(f"{web.base}?token={secret}", timeout=10) as page:  # the redirect, with the cookie
            assert page.status == 200 and page.url == web.base
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(f"{web.base}?token={'x' * 40}", timeout=10)
    finally:
        assert web.stop() == 0
    assert secret not in "".join(web.output)


async def test_a_cookie_is_short_lived_worth_one_session_and_revoked_when_it_ends(client: TestClient) -> None:
    # Cookies have no port: a program on another port of 127.0.0.1 the browser visits receives this one.
    answer = await client.get(f"/?token={TOKEN}", allow_redirects=False)
    assert f"Max-Age={COOKIE_MAX_AGE_S}" in answer.headers["Set-Cookie"] and COOKIE_MAX_AGE_S <= 300
    origin = {"Origin": f"http://{client.host}:{client.port}"}
    ws = await client.ws_connect("/ws", headers=origin)
    assert (await client.get("/")).status == 200  # the page, static files and downloads while it is open
    with pytest.raises(aiohttp.WSServerHandshakeError) as second:  # but no second session with it
        await client.ws_connect("/ws", headers=origin)
    assert second.value.status == 403
    assert len(client.server_under_test.sessions) == 1
    await ws.close()
    server = client.server_under_test
    # the session ends on the server's side once the app has exited
    await await_for(lambda: not server.sessions, "the session to end on the server's side", timeout_s=30)
    assert not server.sessions
    assert (await client.get("/", allow_redirects=False)).status == 401  # revoked with its session
    with pytest.raises(aiohttp.WSServerHandshakeError) as after:
        await client.ws_connect("/ws", headers=origin)
    assert after.value.status == 401


def test_a_cookie_that_opened_no_session_expires_on_the_server_too() -> None:
    now = [0.0]
    gate = AccessGate(TOKEN, clock=lambda: now[0])
    cookie = gate.exchange(TOKEN)
    assert gate.admits(cookie)
    now[0] = COOKIE_MAX_AGE_S + 1.0
    assert not gate.admits(cookie) and not gate.open_session(cookie)
    fresh = gate.exchange(TOKEN)
    assert gate.open_session(fresh) and not gate.open_session(fresh)
    now[0] += 10 * COOKIE_MAX_AGE_S
    assert gate.admits(fresh)  # an open session's cookie lasts as long as the session
    gate.end_session(fresh)
    assert not gate.admits(fresh)
