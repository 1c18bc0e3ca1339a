"""The probe's figures against hand-computed cases (vllm bench serve's definitions)."""

from __future__ import annotations

import pytest

from console.ops.explore.probe_metrics import FROM_CHUNKS, FROM_USAGE, RequestResult, percentile, summarize


def ok(tokens: int, ttft: float, gaps: tuple[float, ...], e2e: float, *, prompt: int = 10,
       source: str = FROM_USAGE) -> RequestResult:
    return RequestResult(ok=True, prompt_tokens=prompt, output_tokens=tokens, tokens_from=source,
                         ttft_s=ttft, itl_s=gaps, e2e_s=e2e)


FAILED = RequestResult(ok=False, prompt_tokens=10, e2e_s=0.5, error="HTTP 500: boom")


def test_percentile_interpolates_linearly_as_numpy():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    assert percentile([4.0, 1.0], 0) == 1.0 and percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_a_level_with_a_single_token_request_and_a_failure():
    results = [ok(3, 0.1, (0.05, 0.05), 0.2), ok(1, 0.2, (), 0.2), FAILED]
    s = summarize(results, 1.0, concurrency=2)
    assert (s.completed, s.failed, s.num_prompts) == (2, 1, 3)
    # Failed requests add neither tokens nor latencies.
    assert (s.total_input_tokens, s.total_output_tokens) == (20, 4)
    assert (s.request_throughput, s.output_throughput, s.total_token_throughput) == (2.0, 4.0, 24.0)
    assert s.ttft.mean_ms == pytest.approx(150.0) and s.ttft.median_ms == pytest.approx(150.0)
    assert s.ttft.p99_ms == pytest.approx(199.0)
    # TPOT: (0.2 - 0.1) / (3 - 1) for the first request; the one-token request has none.
    assert s.tpot.count == 1 and s.tpot.mean_ms == pytest.approx(50.0)
    assert s.itl.count == 2 and s.itl.p95_ms == pytest.approx(50.0)
    assert s.e2el.mean_ms == pytest.approx(200.0)
    assert s.mean_concurrency == pytest.approx(0.4)  # SGLang's: sum of E2E over the duration
    assert s.per_user_tokens_per_s == pytest.approx(20.0)
    assert s.errors == ("HTTP 500: boom",)
    line = s.to_json()
    assert line["mean_tpot_ms"] == pytest.approx(50.0) and line["p95_itl_ms"] == pytest.approx(50.0)
    assert line["failed"] == 1 and line["output_tokens_from"] == FROM_USAGE


def test_only_single_token_outputs_have_no_tpot_and_no_itl():
    s = summarize([ok(1, 0.05, (), 0.05), ok(1, 0.07, (), 0.07)], 0.1, concurrency=2)
    assert s.tpot.mean_ms is None and s.tpot.p99_ms is None and s.itl.median_ms is None
    assert s.per_user_tokens_per_s is None
    assert s.to_json()["mean_tpot_ms"] is None  # vLLM prints 0; no sample is not a zero latency
    assert s.ttft.mean_ms == pytest.approx(60.0)


def test_every_request_failed():
    s = summarize([FAILED, FAILED], 2.0, concurrency=1)
    assert (s.completed, s.failed, s.output_throughput, s.request_throughput) == (0, 2, 0.0, 0.0)
    assert s.ttft.mean_ms is None and s.e2el.median_ms is None
    assert s.errors == ("HTTP 500: boom",)  # distinct messages once


def test_token_counts_without_usage_come_from_chunks_and_say_so():
    chunks_only = summarize([ok(4, 0.1, (0.1, 0.1, 0.1), 0.4, source=FROM_CHUNKS)], 1.0, concurrency=1)
    assert chunks_only.tokens_from == FROM_CHUNKS
    assert chunks_only.tpot.mean_ms == pytest.approx(100.0)
    mixed = summarize([ok(2, 0.1, (0.1,), 0.2), ok(2, 0.1, (0.1,), 0.2, source=FROM_CHUNKS)], 1.0,
                      concurrency=2)
    assert mixed.tokens_from == "mixed"


def test_chunks_holding_several_tokens_keep_tpot_per_token_and_itl_per_chunk():
    # 5 tokens in 2 chunks: TPOT divides by tokens, ITL is the one gap between the chunks.
    s = summarize([ok(5, 0.1, (0.4,), 0.5)], 1.0, concurrency=1)
    assert s.tpot.mean_ms == pytest.approx(100.0) and s.itl.mean_ms == pytest.approx(400.0)


def test_a_zero_duration_has_no_throughput():
    s = summarize([], 0.0, concurrency=1)
    assert s.output_throughput == 0.0 and s.mean_concurrency == 0.0 and s.completed == 0
