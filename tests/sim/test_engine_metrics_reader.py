"""Reading `/metrics` over HTTP the way the health probe reaches the engine: answers, hints, failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from http_stub import http_stub

from console.domain.values import Engine
from console.hosts.endpoints.health import HttpHealthProbe
from console.hosts.endpoints.metrics import EngineMetricsReader, MetricsUnavailable, metrics_reader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


@pytest.fixture
async def engine_http():
    """A loopback server whose /metrics answers what the test puts in `answer` (status, body)."""
    answer = {"status": 200, "body": ""}

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(status=answer["status"], text=answer["body"], content_type="text/plain")

    probes: list[HttpHealthProbe] = []
    async with http_stub({"/metrics": metrics}) as port:

        def reader(engine: Engine) -> EngineMetricsReader:
            probe = HttpHealthProbe(f"http://127.0.0.1:{port}", engine)
            probes.append(probe)
            return EngineMetricsReader(probe, engine)

        yield answer, reader
        for probe in probes:
            await probe.close()


async def test_a_200_is_parsed_with_the_services_engine(engine_http) -> None:
    answer, reader = engine_http
    answer["body"] = (FIXTURES / "sglang_docs_llama31_8b.prom").read_text()
    scrape = await reader(Engine.SGLANG).scrape()
    assert scrape.engine == "sglang" and scrape.running_requests == 162.0


async def test_sglang_404_names_enable_metrics(engine_http) -> None:
    answer, reader = engine_http
    answer["status"] = 404
    with pytest.raises(MetricsUnavailable, match="start SGLang with --enable-metrics"):
        await reader(Engine.SGLANG).scrape()
    with pytest.raises(MetricsUnavailable, match=r"^/metrics answered HTTP 404$"):
        await reader(Engine.VLLM).scrape()  # vLLM always serves it: no such hint


async def test_text_that_is_no_engines_metrics_is_one_line(engine_http) -> None:
    answer, reader = engine_http
    answer["body"] = "process_cpu_seconds_total 3.0\n"
    with pytest.raises(MetricsUnavailable, match="no sglang: or vllm: series"):
        await reader(Engine.OPENAI).scrape()


async def test_a_stopped_engine_is_unreachable_not_a_traceback() -> None:
    probe = HttpHealthProbe("http://127.0.0.1:9", Engine.VLLM, timeout_s=1.0)
    try:
        with pytest.raises(MetricsUnavailable, match="not reachable"):
            await EngineMetricsReader(probe, Engine.VLLM).scrape()
    finally:
        await probe.close()


def test_only_http_probes_get_a_reader() -> None:
    assert metrics_reader(object(), Engine.VLLM) is None
    assert isinstance(
        metrics_reader(HttpHealthProbe("http://127.0.0.1:1", Engine.VLLM), Engine.VLLM), EngineMetricsReader
    )


async def test_a_large_body_is_read_whole(engine_http) -> None:
    """A vLLM dump of many series is far larger than one read buffer: every series must arrive."""
    answer, reader = engine_http
    real = (FIXTURES / "sglang_docs_llama31_8b.prom").read_text()
    padding = "".join(f"# HELP pad_{i} padding\n# TYPE pad_{i} gauge\npad_{i} {i}\n" for i in range(12000))
    answer["body"] = padding + real  # about 500 KB, the engine's own series last
    assert len(answer["body"]) > 400_000
    scrape = await reader(Engine.SGLANG).scrape()
    assert scrape.running_requests == 162.0
