"""The web server's sessions: the cap, the idle limit, the log and `history --web`, a visitor's command."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from waiting import await_for
from web_fakes import TOKEN, stand_in_server

from console.cli import main
from console.ops.session_log import CLOSED, IDLE, INTERRUPTED, OPEN, REFUSED, SERVER_STOPPED, WebSessionLog
from console.ui.web.sessions import QUIT_GRACE_S


async def _client(server) -> TestClient:
    client = TestClient(TestServer(await server.make_app()))
    await client.start_server()
    assert (await client.get(f"/?token={TOKEN}", allow_redirects=False)).status == 303
    return client


async def _open(client: TestClient, path: str = "/ws"):
    """A websocket session from a browser that has just opened the token URL (a cookie is worth one session)."""
    assert (await client.get(f"/?token={TOKEN}", allow_redirects=False)).status == 303
    return await client.ws_connect(path)


async def _until(predicate, timeout_s: float = 30.0) -> bool:
    return bool(await await_for(predicate, "the session log to reach the state", timeout_s=timeout_s))


def _outcomes(server) -> list[str]:
    return [s.outcome for s in server.log.sessions()]


def _alive(pid: int | None) -> bool:
    return pid is not None and Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text()


async def test_sessions_over_the_cap_are_refused_and_logged(tmp_path: Path) -> None:
    server = stand_in_server(tmp_path, max_sessions=1)
    client = await _client(server)
    try:
        first = await _open(client)
        assert await _until(lambda: server.log.sessions() and server.log.sessions()[0].app_pid)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await _open(client)
        assert refused.value.status == 503
        page = await client.get("/")
        assert page.status == 503 and "1 session open, the most this server allows" in await page.text()
        assert _outcomes(server) == [OPEN, REFUSED]
        pid = server.log.sessions()[0].app_pid
        await first.close()  # a reload: the old page leaves as the new one connects, and gets its place
        again = await _open(client)
        assert await _until(lambda: _outcomes(server) == [CLOSED, REFUSED, OPEN])
        assert not _alive(pid)
        await again.close()
    finally:
        await client.close()
        await server.end_sessions()
        server.log.close()


async def test_an_idle_session_ends_and_input_keeps_one_open(tmp_path: Path) -> None:
    # A 3 s limit against a key every 0.3 s: ten keys' margin on a loaded machine.
    server = stand_in_server(tmp_path, idle_s=3.0)
    client = await _client(server)
    try:
        busy = await _open(client)
        idle = await _open(client)

        async def typing_until_the_other_idles() -> bool:  # a key every 0.3 s on one of them
            await busy.send_str(json.dumps(["stdin", "j"]))
            return len(_outcomes(server)) == 2 and _outcomes(server)[1] == IDLE

        await await_for(typing_until_the_other_idles, "the session without input to end idle", interval_s=0.3)
        rows = {s.id: s for s in server.log.sessions()}
        assert [r.outcome for r in rows.values()] == [OPEN, IDLE]
        assert rows[2].reason == "no input for 0.05 min"
        assert await _until(lambda: not _alive(rows[2].app_pid))
        msg = await idle.receive(timeout=5)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)  # the browser is told
        await busy.close()
    finally:
        await client.close()
        await server.end_sessions()
        server.log.close()


async def test_stopping_the_server_ends_and_logs_every_session(tmp_path: Path) -> None:
    server = stand_in_server(tmp_path)
    client = await _client(server)
    try:
        for _ in range(2):
            await _open(client)
        assert await _until(lambda: all(s.app_pid for s in server.log.sessions()) and len(server.sessions) == 2)
        pids = [s.app_pid for s in server.log.sessions()]
        await server.end_sessions()
        # each app has QUIT_GRACE_S to quit, then is killed and waited for as long: a guard past both
        assert await _until(lambda: _outcomes(server) == [SERVER_STOPPED, SERVER_STOPPED], timeout_s=4 * QUIT_GRACE_S)
        assert not any(_alive(pid) for pid in pids)
    finally:
        await client.close()
        server.log.close()


def test_a_session_left_open_by_a_killed_server_reads_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    log = WebSessionLog(path)
    gone = log.begin(remote="127.0.0.1", user_agent="x", readonly=True)
    log._execute("UPDATE web_sessions SET server_pid=? WHERE id=?", (2**22 + 12345, gone))  # no such process
    mine = log.begin(remote="127.0.0.1", user_agent="x", readonly=True)
    log.close()
    reopened = WebSessionLog(path)
    assert {s.id: s.outcome for s in reopened.sessions()} == {gone: INTERRUPTED, mine: OPEN}
    reopened.close()


def test_history_web_shows_each_session(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    log = WebSessionLog(tmp_path / "audit.sqlite3")
    first = log.begin(remote="127.0.0.1", user_agent="Chrome\x1b[2J", readonly=True)
    log.end(first, IDLE, "no input for 30 min")
    log.refused(remote="10.0.0.7", user_agent=None, readonly=False, reason="503: 4 sessions open")
    log.close()
    assert main(["history", "--web"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#1 ") and lines[0].endswith("127.0.0.1 read-only: idle (no input for 30 min)")
    assert "10.0.0.7 actions allowed: refused (503: 4 sessions open)" in lines[1]
    assert main(["history", "--web", "--json", "-n", "1"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["event"] == "web_session" and row["outcome"] == REFUSED and row["readonly"] is False
    assert main(["history", "--web", "--host", "gpu1"]) == 2


def test_a_visitor_runs_read_only_unless_actions_are_allowed() -> None:
    from console.ui.web.visitor import visitor_argv

    watching = visitor_argv(config_path="/etc/serve-console/hosts.toml", demo_urls=[], readonly=True, theme=None)
    assert watching[1:] == ["-m", "console.ui.web.visitor", "--config", "/etc/serve-console/hosts.toml", "--readonly"]
    acting = visitor_argv(config_path=None, demo_urls=["demo/kimi-k2.6=http://127.0.0.1:30007"], readonly=False,
                          theme="light")
    assert "--readonly" not in acting
    assert acting[3:] == ["--demo", "--url", "demo/kimi-k2.6=http://127.0.0.1:30007", "--theme", "light"]


def test_a_demo_visitor_attaches_to_the_servers_ports() -> None:
    from console.ui.web.visitor import _config, _parser

    config = _config(_parser().parse_args(["--demo", "--url", "demo/kimi-k2.6=http://127.0.0.1:30007"]))
    urls = {(h.name, s.name): s.url for h in config.hosts for s in h.services}
    assert urls[("demo", "kimi-k2.6")] == "http://127.0.0.1:30007"
    assert urls[("demo-vllm", "qwen3-235b")] == "http://127.0.0.1:8000"  # not moved: as packaged
