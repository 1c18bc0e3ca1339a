"""Numbers from an engine's `/metrics` are data: NaN and infinities read as "not exported", a counter's
rate is never negative, JSON output never holds NaN, and one bad series is skipped with a note instead
of failing the whole reading (issue 18, B5 and B8)."""

from __future__ import annotations

import json
import math
import types

import pytest
from aiohttp import web
from http_stub import http_stub

from console.commands.host_args import print_json
from console.domain.metrics import MetricsHistory, MetricsTextError, parse_metrics
from console.domain.metrics.engine_metrics import EngineFigures, counter_increase
from console.domain.values import Engine
from console.hosts.endpoints import HttpHealthProbe
from console.hosts.endpoints.metrics import EngineMetricsReader
from console.ops.engine_status import engine_figures, figures_line, metrics_json
from console.ui.widgets.engine_pane import scaled
from console.ui.widgets.gpu_pane import bar, sparkline

NON_FINITE = """\
vllm:num_requests_running{model_name="m"} NaN
vllm:num_requests_waiting{model_name="m"} +Inf
vllm:kv_cache_usage_perc{model_name="m"} NaN
vllm:generation_tokens_total{model_name="m"} -Inf
vllm:prompt_tokens_total{model_name="m"} 100
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} NaN
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} NaN
"""

BAD_BUCKET = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{le="abc",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 3
vllm:time_to_first_token_seconds_count{model_name="m"} 3
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.2
vllm:num_requests_running{model_name="m"} 4
"""


def test_a_non_finite_sample_is_not_exported() -> None:
    scrape = parse_metrics(NON_FINITE, 0.0)
    assert scrape.running_requests is None and scrape.waiting_requests is None
    assert scrape.kv_cache_usage is None and scrape.generation_tokens_total is None
    assert scrape.prompt_tokens_total == 100.0
    assert scrape.ttft is None  # every bucket NaN: no histogram at all


def test_a_counters_rate_is_never_negative_nor_nan() -> None:
    assert counter_increase([10.0, -5.0, 12.0]) == 2.0  # a negative reading is no counter's
    assert counter_increase([10.0, math.nan, 4.0]) == 4.0  # NaN skipped; 4 after 10 is a reset
    assert counter_increase([10.0, -math.inf]) is None
    history = MetricsHistory()
    for at, total in ((0.0, 100.0), (1.0, -50.0), (2.0, 90.0)):
        history.add(parse_metrics(f"vllm:generation_tokens_total {total}\n", at))
    rate = history.rate("generation_tokens_total")
    assert rate is not None and rate >= 0
    assert all(v >= 0 for v in history.series("generation_tokens_total"))


def test_bars_and_sparklines_take_non_finite_values() -> None:
    assert bar(math.nan, 10) == ("", "░" * 10)
    assert bar(math.inf, 4) == ("", "░" * 4)
    assert sparkline([math.nan, math.inf, -math.inf, 1.0], 5) == "    █"
    assert scaled([math.inf, 2.0, 4.0]) == [pytest.approx(math.nan, nan_ok=True), 0.5, 1.0]


def test_json_output_writes_null_for_nan_and_infinity(capsys: pytest.CaptureFixture[str]) -> None:
    figures = EngineFigures(age_s=0.0, running_requests=math.nan, waiting_requests=math.inf,
                            kv_cache_usage=-math.inf, generation_tokens_per_s=None, prompt_tokens_per_s=1.5,
                            ttft_p50_s=None, ttft_p99_s=None, itl_p50_s=None, itl_p99_s=None)
    print_json({"host": "h", **metrics_json(figures, None), "levels": [math.nan, (math.inf, 2.0)]})
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    line = json.loads(out)  # strict readers (jq, JSON.parse) take it
    assert line["metrics"]["running_requests"] is None and line["metrics"]["waiting_requests"] is None
    assert line["metrics"]["kv_cache_usage"] is None and line["metrics"]["prompt_tokens_per_s"] == 1.5
    assert line["levels"] == [None, [None, 2.0]]


def test_one_bad_bucket_is_skipped_with_a_note() -> None:
    scrape = parse_metrics(BAD_BUCKET, 0.0)
    assert scrape.running_requests == 4.0
    assert scrape.ttft is not None and [b for b, _ in scrape.ttft.buckets] == [0.1, math.inf]
    (note,) = scrape.notes
    assert note == "skipped vllm:time_to_first_token_seconds_bucket{le='abc'}: le is not a number"


def test_an_unreadable_line_is_skipped_with_a_note_and_the_rest_is_read() -> None:
    text = 'vllm:num_requests_running 3\nvllm:num_requests_waiting{a="b} 2\nvllm:kv_cache_usage_perc 0.5\n'
    scrape = parse_metrics(text, 0.0)
    assert scrape.running_requests == 3.0 and scrape.kv_cache_usage == 0.5 and scrape.waiting_requests is None
    assert scrape.notes == ("skipped 1 unreadable line(s) of /metrics (the first is line 2)",)
    with pytest.raises(MetricsTextError):  # nothing readable at all is still not Prometheus text
        parse_metrics("vllm:x{ broken\nvllm:y{ broken\n", 0.0)


async def test_status_and_probe_read_a_host_with_one_bad_series() -> None:
    """`status` read such a host as unreachable and `probe` ended in a traceback: both read it now."""
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=BAD_BUCKET, content_type="text/plain")

    async with http_stub({"/metrics": metrics}) as port:
        probe = HttpHealthProbe(f"http://127.0.0.1:{port}", Engine.VLLM)
        try:
            scrape = await EngineMetricsReader(probe, Engine.VLLM).scrape()  # what probe reads per level
            assert scrape.running_requests == 4.0 and len(scrape.notes) == 1
            host = types.SimpleNamespace(probes={"llm": probe})
            service = types.SimpleNamespace(name="llm", engine=Engine.VLLM)
            figures, why = await engine_figures(host, service, running=True, interval_s=0.01)  # type: ignore[arg-type]
        finally:
            await probe.close()
    assert why is None and figures is not None and figures.running_requests == 4.0
    assert figures_line(figures, why).endswith("(skipped vllm:time_to_first_token_seconds_bucket{le='abc'}: "
                                               "le is not a number)")
    assert metrics_json(figures, why)["metrics"]["notes"] == [scrape.notes[0]]
