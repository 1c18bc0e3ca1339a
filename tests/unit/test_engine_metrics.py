"""Engine metrics: parsing real `/metrics` texts of both engines, counter resets, missing series, and
histogram quantiles against hand-computed ones (Prometheus' `histogram_quantile` rule)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from console.domain.metrics.engine_metrics import (
    Histogram,
    MetricsHistory,
    counter_increase,
    histogram_increase,
    histogram_quantile,
)
from console.domain.metrics.exposition import MetricsTextError, parse_metrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
INF = math.inf


def fixture(name: str, engine: str | None = None, at: float = 0.0):
    return parse_metrics((FIXTURES / name).read_text(), at, engine)


def test_sglang_docs_sample_reads_every_figure_it_has() -> None:
    scrape = fixture("sglang_docs_llama31_8b.prom")
    assert scrape.engine == "sglang"
    assert (scrape.running_requests, scrape.waiting_requests, scrape.kv_cache_usage) == (162, 2826, 0.28)
    assert (scrape.prompt_tokens_total, scrape.generation_tokens_total) == (8.128902e06, 7.557572e06)
    assert scrape.cache_hit_rate == pytest.approx(0.007507552643049313)
    assert scrape.ttft is not None and scrape.ttft.count == 11008 and scrape.ttft.buckets[-1] == (INF, 11008)
    # The only per-token histogram in this version is the older name: it is read as the ITL.
    assert scrape.itl is not None and scrape.itl.count == 7.400757e06
    assert scrape.preemptions_total is None and scrape.spec_accept_length is None  # not exported, not 0


def test_sglang_quantiles_match_hand_computed_ones() -> None:
    scrape = fixture("sglang_docs_llama31_8b.prom")
    total = 7400757
    # p50: rank 3700378.5 falls in (0.075, 0.1], which holds 4950195 - 433413 observations.
    p50 = 0.075 + (0.1 - 0.075) * (0.5 * total - 433413) / (4950195 - 433413)
    # p99: rank 7326749.43 falls in (0.5, 0.75], which holds 7339675 - 7312226 observations.
    p99 = 0.5 + (0.75 - 0.5) * (0.99 * total - 7312226) / (7339675 - 7312226)
    assert histogram_quantile(0.5, scrape.itl.buckets) == pytest.approx(p50)
    assert histogram_quantile(0.99, scrape.itl.buckets) == pytest.approx(p99)
    assert (round(p50, 4), round(p99, 4)) == (0.0931, 0.6323)
    # 8495 of 11008 TTFTs are above the last finite bound: the answer is that bound, as Prometheus gives.
    assert histogram_quantile(0.5, scrape.ttft.buckets) == 30.0


def test_vllm_v1_sample_reads_the_kv_and_prefix_cache_counters() -> None:
    scrape = fixture("vllm_0.10_glm45_cache_excerpt.prom")
    assert scrape.engine == "vllm"
    assert scrape.kv_cache_usage == pytest.approx(9.75010481363281e-06)
    assert scrape.prefix_cache_queries_total == 32.0
    assert scrape.prefix_cache_hits_total == 0.0  # from the deprecated gpu_ name, the only one in this dump
    assert scrape.running_requests is None and scrape.ttft is None


def test_vllm_ttft_sample_quantiles_interpolate_inside_the_bucket() -> None:
    ttft = fixture("vllm_0.6_opt125m_ttft_excerpt.prom").ttft
    assert ttft is not None
    # One observation in (0.01, 0.02]: the q-quantile is 0.01 + 0.01 q.
    assert histogram_quantile(0.5, ttft.buckets) == pytest.approx(0.015)
    assert histogram_quantile(0.99, ttft.buckets) == pytest.approx(0.0199)


def test_older_vllm_names_are_read_and_a_histogram_without_inf_has_no_quantile() -> None:
    scrape = fixture("vllm_0.6_qwen25coder_tpot_excerpt.prom")
    assert scrape.itl is not None and scrape.itl.buckets[-1] == (1.0, 135001.0)
    assert histogram_quantile(0.5, scrape.itl.buckets) is None  # no +Inf bucket: undefined, as in Prometheus
    old = fixture("vllm_0.4_bloom560m_tokens_excerpt.prom")
    assert (old.prompt_tokens_total, old.generation_tokens_total) == (1196.0, 218152.0)
    assert old.kv_cache_usage is None  # cpu_cache_usage_perc is not the GPU KV cache


def test_histogram_quantile_edge_cases() -> None:
    assert histogram_quantile(0.5, [(1.0, 0.0), (INF, 0.0)]) is None  # no observations
    assert histogram_quantile(1.5, [(1.0, 1.0), (INF, 1.0)]) is None
    assert histogram_quantile(0.5, [(0.0, 4.0), (1.0, 4.0), (INF, 4.0)]) == 0.0  # first bound <= 0
    # Non-monotonic counts (a scrape taken mid-update) are repaired upwards, as Prometheus does.
    assert histogram_quantile(0.5, [(1.0, 4.0), (2.0, 3.0), (INF, 4.0)]) == pytest.approx(0.5)


def test_counter_increase_handles_resets_and_missing_readings() -> None:
    assert counter_increase([100, 150, 20, 50]) == 50 + 20 + 30  # the engine restarted at the third
    assert counter_increase([None, 7, None, 9]) == 2
    assert counter_increase([5]) is None and counter_increase([None, None]) is None


def test_histogram_increase_counts_a_reset_interval_whole() -> None:
    a = Histogram(((0.1, 5.0), (INF, 10.0)), 10.0, 3.0)
    b = Histogram(((0.1, 7.0), (INF, 14.0)), 14.0, 4.0)
    restarted = Histogram(((0.1, 1.0), (INF, 1.0)), 1.0, 0.05)
    grown = histogram_increase([a, b, restarted])
    assert grown == Histogram(((0.1, 3.0), (INF, 5.0)), 5.0, pytest.approx(1.05))


def _tick(scrape, at: float, tokens: float = 0.0, ttft_in_004_006: float = 0.0):
    """The scrape `at` seconds on: `tokens` more generated, some TTFTs more in (0.04, 0.06]."""
    ttft = scrape.ttft
    buckets = tuple((b, c + (ttft_in_004_006 if b >= 0.06 else 0.0)) for b, c in ttft.buckets)
    return dataclasses.replace(
        scrape, taken_at=at, generation_tokens_total=scrape.generation_tokens_total + tokens,
        ttft=Histogram(buckets, ttft.count + ttft_in_004_006, ttft.sum + 0.05 * ttft_in_004_006))  # fmt: skip


def test_history_gives_rates_and_last_minute_quantiles() -> None:
    history = MetricsHistory()
    a = fixture("sglang_docs_llama31_8b.prom", at=1000.0)
    b = _tick(a, 1030.0, tokens=3000, ttft_in_004_006=10)
    c = _tick(b, 1040.0, tokens=500)
    for scrape in (a, b, c):
        history.add(scrape)
    figures = history.figures(now=1042.5)
    assert figures.age_s == pytest.approx(2.5)
    assert figures.generation_tokens_per_s == pytest.approx(50.0)  # the last 10 s: 500 tokens
    assert figures.ttft_p50_s == pytest.approx(0.04 + 0.02 * 5 / 10)  # only this minute's ten TTFTs
    assert figures.prompt_tokens_per_s == 0.0 and figures.kv_cache_usage == 0.28
    assert figures.prefix_cache_hit_rate == pytest.approx(0.007507552643049313)  # SGLang's own gauge
    d = _tick(c, 1100.0)
    history.add(d)
    later = history.figures(now=1100.0)
    assert later.ttft_p50_s is None  # nothing observed in the last minute: no quantile, not a stale one
    assert later.generation_tokens_per_s == 0.0
    assert history.series("generation_tokens_total") == pytest.approx([100.0, 50.0, 0.0])


def test_a_restart_between_scrapes_is_not_a_negative_rate() -> None:
    history = MetricsHistory()
    a = fixture("sglang_docs_llama31_8b.prom", at=0.0)
    history.add(a)
    history.add(dataclasses.replace(a, taken_at=5.0, generation_tokens_total=400.0))
    assert history.rate("generation_tokens_total") == pytest.approx(80.0)


def test_replicas_are_summed_and_ranks_of_one_replica_counted_once() -> None:
    vllm = "\n".join(
        [
            'vllm:num_requests_running{engine="0",model_name="m"} 3',
            'vllm:num_requests_running{engine="1",model_name="m"} 5',
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2',
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.4',
        ]
    )
    scrape = parse_metrics(vllm + "\n", 0.0)
    assert scrape.running_requests == 8 and scrape.kv_cache_usage == pytest.approx(0.3)
    sglang = "\n".join(
        [
            'sglang:num_running_reqs{model_name="m",tp_rank="0"} 4',
            'sglang:num_running_reqs{model_name="m",tp_rank="1"} 4',
            'sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="0"} 2',
        ]
    )
    assert parse_metrics(sglang + "\n", 0.0).running_requests == 6


def test_vllm_spec_decode_acceptance_from_counters() -> None:
    history = MetricsHistory()
    lines = (
        "vllm:spec_decode_num_drafts_total {d}\nvllm:spec_decode_num_draft_tokens_total {t}\n"
        "vllm:spec_decode_num_accepted_tokens_total {a}\nvllm:num_preemptions_total {p}\n"
    )
    history.add(parse_metrics(lines.format(d=100, t=300, a=150, p=2), 0.0))
    history.add(parse_metrics(lines.format(d=200, t=600, a=330, p=5), 10.0))
    figures = history.figures(10.0)
    assert figures.spec_accept_length == pytest.approx(1 + 180 / 100)
    assert figures.spec_accept_rate == pytest.approx(180 / 300)
    assert figures.preemptions == 3


@pytest.mark.parametrize("text", ["this is not { prometheus\n", "up 1\nprocess_cpu_seconds_total 3\n"])
def test_unreadable_or_foreign_text_is_one_error(text: str) -> None:
    with pytest.raises(MetricsTextError):
        parse_metrics(text, 0.0)
