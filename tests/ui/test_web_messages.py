"""What a browser sends on the websocket (issue 30 E23, E28): a terminal size is clamped, in `resize` messages and
in `/ws?width=&height=`, and a malformed message is one line on the server's output, no traceback, the
session going on."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from waiting import WaitTimeout, await_for
from web_fakes import TOKEN

from console.ops.session_log import WebSessionLog
from console.ui.web.access import AccessGate
from console.ui.web.messages import MAX_COLUMNS, MAX_ROWS
from console.ui.web.server import ConsoleWebServer, WebLimits

#: The stand-in app of web_fakes, which also writes down its start size and every packet it is sent.
RECORDING_APP = r"""
import os, sys
out = open(sys.argv[1], "ab", buffering=0)
out.write(f"start {os.environ['COLUMNS']}x{os.environ['ROWS']}\n".encode())
os.write(1, b"__GANGLION__\n")
while True:
    data = os.read(0, 65536)
    out.write(data + b"\n")
    if not data or b'"quit"' in data:
        break
exit_packet = b'{"type": "exit"}'
os.write(1, b"M" + len(exit_packet).to_bytes(4, "big") + exit_packet)
"""


@pytest.fixture
async def web(tmp_path: Path):
    said: list[str] = []
    record = tmp_path / "app-input"
    limits = WebLimits(max_sessions=2, idle_s=60.0, readonly=True)
    server = ConsoleWebServer([sys.executable, "-c", RECORDING_APP, str(record)], {}, gate=AccessGate(TOKEN),
                              limits=limits, log=WebSessionLog(tmp_path / "audit.sqlite3"), say=said.append)
    async with TestClient(TestServer(await server.make_app())) as client:
        assert (await client.get(f"/?token={TOKEN}", allow_redirects=False)).status == 303
        client.said, client.record = said, record
        yield client
    await server.end_sessions()
    server.log.close()


async def _until(predicate, timeout_s: float = 30.0) -> bool:
    try:
        return bool(await await_for(predicate, "a condition", timeout_s=timeout_s))
    except WaitTimeout:
        return bool(predicate())


def _recorded(client) -> str:
    return client.record.read_text(errors="replace") if client.record.exists() else ""


async def test_a_huge_size_is_clamped_in_the_query_and_in_resize_messages(web) -> None:
    ws = await web.ws_connect("/ws?width=12000&height=12000", headers={"Origin": f"http://{web.host}:{web.port}"})
    assert await _until(lambda: "start" in _recorded(web))
    assert f"start {MAX_COLUMNS}x{MAX_ROWS}\n" in _recorded(web)
    await ws.send_str(json.dumps(["resize", {"width": 12000, "height": 12000}]))
    await ws.send_str(json.dumps(["resize", {"width": 100, "height": 30}]))
    assert await _until(lambda: '"width": 100' in _recorded(web) or '"width":100' in _recorded(web))
    text = _recorded(web)
    assert "12000" not in text
    assert f'"width": {MAX_COLUMNS}, "height": {MAX_ROWS}' in text  # the first resize arrived, clamped
    await ws.close()


@pytest.mark.parametrize("raw", ['["stdin", 5]', "null", '["stdin"]', "[]", "{}", '["resize", {"width": "wide"}]',
                                 '["resize", null]', "not json", '["ping", {"a": 1}]'])
async def test_a_malformed_message_is_one_line_and_the_session_goes_on(web, raw: str, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    ws = await web.ws_connect("/ws", headers={"Origin": f"http://{web.host}:{web.port}"})
    await ws.send_str(raw)
    await ws.send_str(raw)  # said once per session, not once per message
    await ws.send_str(json.dumps(["ping", "after"]))
    answer = None
    while answer is None or answer.type != aiohttp.WSMsgType.TEXT:  # the app's own packets may come first
        answer = await asyncio.wait_for(ws.receive(), timeout=30)
        assert answer.type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), "the session ended"
    assert json.loads(answer.data) == ["pong", "after"]
    (line,) = web.said
    assert line.startswith("serve-console web: session ") and "ignored a malformed message" in line
    assert "\n" not in line
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    await ws.close()
