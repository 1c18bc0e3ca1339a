"""What a host's HTTP answers can do to the console: bodies are read to a bound, deep JSON is one line,
a broken netrc never echoes its tokens, and a server's error text reaches the terminal printable (issue
18, B9, B10 and B13)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from aiohttp import web
from http_stub import http_stub

from console.domain.values import Engine
from console.errors import HostError
from console.hosts.endpoints import HttpHealthProbe, PrometheusClient
from console.hosts.endpoints.prometheus import auth_headers

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]2;pwned\x07 oops\u202e [/] \x9b2J"


def endless(sent: list[int], status: int = 200):
    """A handler that streams zeros until the client stops reading (or 512 MiB), counting what it sent."""
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=status)
        await resp.prepare(request)
        chunk = b"0" * (1 << 20)
        try:
            for _ in range(512):
                await resp.write(chunk)
                sent[0] += len(chunk)
        except (ConnectionError, RuntimeError):  # the client hung up: what we measure
            pass
        return resp
    return handler


@pytest.mark.parametrize("engine, paths", [(Engine.VLLM, ("/health",)), (Engine.OPENAI, ("/health", "/v1/models"))])
async def test_health_and_models_bodies_are_read_to_a_bound(engine: Engine, paths: tuple[str, ...]) -> None:
    """`status` held 4.4 GB reading a /health that never ended; now a probe reads 1 MiB at most."""
    sent = [0]
    routes = {"/health": endless(sent, 404 if "/v1/models" in paths else 200), "/v1/models": endless(sent)}
    async with http_stub(routes) as port:
        probe = HttpHealthProbe(f"http://127.0.0.1:{port}", engine, timeout_s=20.0)
        try:
            sample = await probe.probe()
        finally:
            await probe.close()
    assert sample.status == "ready", sample
    # What the server got out before the client hung up: the bound plus what the socket buffers held.
    assert sent[0] < 48 * 2**20 * len(paths), sent[0]


async def _prometheus(answer: bytes):
    app = web.Application()

    async def query(request: web.Request) -> web.Response:
        return web.Response(body=answer, content_type="application/json")

    app.router.add_post("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def test_deeply_nested_json_from_prometheus_is_one_line() -> None:
    runner, url = await _prometheus(b"[" * 200_000 + b"]" * 200_000)
    client = PrometheusClient(url, headers={})
    try:
        with pytest.raises(HostError, match=r"the answer is not readable JSON \(the JSON is nested too deeply"):
            await client.query("up")
    finally:
        await client.close()
        await runner.cleanup()


def test_a_netrc_syntax_error_never_echoes_its_tokens(tmp_path: Path) -> None:
    broken = tmp_path / "netrc"
    broken.write_text("machine prom.example login ops password s3cret\nhunter2-TOKEN\n")
    with pytest.raises(HostError) as err:
        auth_headers("https://prom.example:9090", {"NETRC": str(broken)})
    assert "hunter2" not in str(err.value) and "s3cret" not in str(err.value)
    assert str(err.value) == f"prometheus: cannot read {broken}:3: not a netrc file (syntax error)"


async def test_a_prometheus_error_reaches_stderr_printable(tmp_path: Path) -> None:
    """`fleet` printed the server's error text raw: an OSC 2 there set the operator's terminal title."""
    import json

    answer = json.dumps({"status": "error", "errorType": "bad_data\x1b[2J", "error": HOSTILE + "\nsecond"})
    runner, url = await _prometheus(answer.encode())
    config = tmp_path / "hosts.toml"
    config.write_text(f'[fleet]\nprometheus = "{url}"\n[hosts.gpu-1]\naddress = "192.0.2.1"\n'
                      '[hosts.gpu-1.services.llm]\nengine = "vllm"\nurl = "http://127.0.0.1:8000"\n'
                      'mapping = "template"\ntemplate = "vllm@.service"\nlayouts = ["TP8"]\n')
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "console", "--config", str(config), "fleet", cwd=REPO,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await runner.cleanup()
    text = err.decode()
    assert proc.returncode == 1 and out == b"", text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text
    assert not any(ch in text for ch in "\x1b\x07\u202e\x9b"), repr(text)
    assert "\\x1b]2;pwned\\x07 oops\\u202e [/] \\x9b2J\\nsecond" in text


async def test_the_probes_model_list_is_read_to_a_bound_and_deep_json_is_one_line() -> None:
    """`probe` asks /v1/models for the model its requests carry: a flood or deep JSON is a refusal."""
    from console.ops.explore.probe_client import ProbeClient

    sent = [0]

    async def nested(request: web.Request) -> web.Response:
        return web.Response(body=b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")

    async with http_stub({"/v1/models": endless(sent)}) as flood, http_stub({"/v1/models": nested}) as deep:
        async with ProbeClient(f"http://127.0.0.1:{flood}") as client:
            with pytest.raises(ValueError, match="answered more than 1 MiB"):
                await client.served_model()
        async with ProbeClient(f"http://127.0.0.1:{deep}") as client:
            with pytest.raises(ValueError, match="nested too deeply"):
                await client.served_model()
    assert sent[0] < 48 * 2**20
