"""The progress model on the engines' real metrics and log lines (tests/fixtures/progress/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from console.domain.metrics import parse_metrics
from console.domain.progress import (
    IDLE,
    SERVING,
    STALLED,
    UNKNOWN,
    GpuReading,
    ProgressMemory,
    ProgressReading,
    judge,
    parse_batch_line,
    rank_words,
    reading_from_scrape,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BUSY = (FIX / "vllm-real" / "metrics-busy.txt").read_text()
IDLE_TEXT = (FIX / "vllm-real" / "metrics-idle.txt").read_text()
SGLANG_DOC = (FIX / "metrics" / "sglang_docs_llama31_8b.prom").read_text()
KEY = "vllm-tiny@TP1.service:86"


def _lines(name: str) -> list[str]:
    return (FIX / "progress" / name).read_text().splitlines()


def _vllm(text: str, at: float, **extra):
    return reading_from_scrape(parse_metrics(text, at), taken_at=at, engine="vllm", **extra)


def _run(readings, stall_after_s=20.0):
    memory, verdicts = None, []
    for reading in readings:
        verdict = judge(memory, reading, engine_key=KEY, stall_after_s=stall_after_s)
        memory = verdict.memory
        verdicts.append(verdict)
    return verdicts


def test_vllm_busy_dump_reads_its_per_step_series():
    reading = _vllm(BUSY, 0.0)
    counters = dict(reading.counters)
    assert counters["vllm:generation_tokens_total"] == 12333.0
    assert counters["vllm:iteration_tokens_total_count"] == 6742.0
    assert reading.running == 4.0 and reading.waiting == 0.0


def test_frozen_counters_with_requests_running_are_a_stall_after_stall_after_s():
    # the real busy dump read again and again, unchanged: vllm#41725's frozen counters, 4 running
    verdicts = _run([_vllm(BUSY, t) for t in (0.0, 5.0, 19.0, 21.0, 40.0)])
    assert [v.state for v in verdicts[:3]] == [SERVING, SERVING, SERVING]
    assert verdicts[3].state == STALLED
    assert verdicts[3].since == 0.0  # the stall is dated from when progress was last seen (the first reading)
    assert "vllm:generation_tokens_total" in verdicts[3].reason and "4 running" in verdicts[3].reason
    assert verdicts[4].since == verdicts[3].since


def test_counters_that_grow_are_serving():
    later = BUSY.replace("generation_tokens_total{engine=\"0\",model_name=\"tiny-moe\"} 12333.0",
                         "generation_tokens_total{engine=\"0\",model_name=\"tiny-moe\"} 12340.0")
    assert later != BUSY
    verdicts = _run([_vllm(BUSY, 0.0), _vllm(BUSY, 19.0), _vllm(later, 30.0), _vllm(later, 45.0)])
    assert verdicts[2].state == SERVING and "vllm:generation_tokens_total +7" in verdicts[2].reason
    assert verdicts[2].last_progress_at == 30.0
    assert verdicts[3].state == SERVING  # 15 s quiet: not yet


def test_idle_dump_is_idle_for_an_hour():
    scrape = parse_metrics(IDLE_TEXT, 0.0)
    verdicts = _run([reading_from_scrape(scrape, taken_at=t, engine="vllm") for t in range(0, 3600, 30)])
    assert {v.state for v in verdicts} == {IDLE}


def test_the_running_gauge_at_zero_does_not_hide_our_own_request():
    # vllm#46811: a wedge read num_requests_running 0; the console's own request in flight is pending work
    verdicts = _run([_vllm(IDLE_TEXT, t, ours=1) for t in (0.0, 10.0, 25.0)])
    assert verdicts[-1].state == STALLED and verdicts[-1].pending.ours == 1


def test_a_request_arriving_after_an_idle_hour_gets_its_own_grace():
    verdicts = _run([_vllm(IDLE_TEXT, 0.0), _vllm(IDLE_TEXT, 3600.0), _vllm(IDLE_TEXT, 3605.0, ours=1)])
    assert verdicts[-1].state == SERVING


def test_kv_usage_rising_chunk_by_chunk_is_slow_not_stalled():
    def at(t: float, usage: float) -> ProgressReading:
        return ProgressReading(taken_at=t, engine="vllm", counters=(("vllm:generation_tokens_total", 40.0),),
                               running=1, waiting=0, kv_usage=usage)
    verdicts = _run([at(t, 0.01 * i) for i, t in enumerate(range(0, 200, 15))])
    assert STALLED not in {v.state for v in verdicts}
    assert "KV cache usage rising" in verdicts[-1].reason


def test_a_start_before_ready_is_never_stalled():
    verdicts = _run([_vllm(BUSY, t, ready=False) for t in (0.0, 100.0, 400.0)])
    assert {v.state for v in verdicts} == {UNKNOWN}


def test_canary_timeout_is_a_stall_even_with_gauges_at_zero():
    verdict = _run([_vllm(IDLE_TEXT, 0.0), _vllm(IDLE_TEXT, 80.0, canary_timed_out_s=20.0)])[-1]
    assert verdict.state == STALLED and "canary" in verdict.reason


def test_sglang_health_503_with_work_pending_is_a_stall_and_says_so():
    scrape = parse_metrics(SGLANG_DOC, 0.0)
    text = "SGLang /health answered 503 (its one-token check had no answer in 20 s)"
    reading = reading_from_scrape(scrape, taken_at=5.0, engine="sglang", health_failed=text)
    verdict = judge(None, reading, engine_key=KEY)
    assert verdict.state == STALLED and "503" in verdict.reason


def test_sglang_reads_per_token_series_not_only_finish_counters():
    scrape = parse_metrics(SGLANG_DOC, 0.0)
    names = dict(reading_from_scrape(scrape, taken_at=0.0, engine="sglang").counters)
    assert names["sglang:inter_token_latency_seconds_count"] == 7400757.0  # the older per-token name
    assert "sglang:time_to_first_token_seconds_count" in names


def test_sglang_realtime_tokens_sum_every_mode():
    text = SGLANG_DOC + "".join(
        f'sglang:realtime_tokens_total{{model_name="meta-llama/Llama-3.1-8B-Instruct",mode="{m}"}} {v}\n'
        for m, v in (("prefill_compute", 100.0), ("prefill_cache", 20.0), ("decode", 5.0)))
    assert parse_metrics(text, 0.0).realtime_tokens_total == 125.0


def test_sglang_batch_lines_real_shapes():
    chunk = parse_batch_line(_lines("sglang_prefill_chunks.log")[1])
    assert chunk is not None and chunk.kind == "prefill" and chunk.new_tokens == 8192
    assert chunk.waiting == 38 and chunk.running == 1 and chunk.rank == "TP0" and chunk.token_usage == 0.04
    old = parse_batch_line(_lines("sglang_decode_old.log")[0])
    assert old is not None and old.kind == "decode" and old.running == 8 and old.rank == "TP0"
    new = parse_batch_line(_lines("sglang_decode_new.log")[0])
    assert new is not None and new.kind == "decode" and new.running == 6 and new.waiting == 0
    assert parse_batch_line('INFO:     127.0.0.1:39830 - "GET /health HTTP/1.1" 200 OK') is None


def test_vllm_stats_lines_real_shapes():
    busy, held, zero = (parse_batch_line(line) for line in _lines("vllm_stats.log"))
    assert busy is not None and busy.moved and busy.running == 4
    assert held is not None and held.moved and held.waiting == 14
    assert zero is not None and not zero.moved and zero.running == 1 and zero.waiting == 0


def test_batch_lines_alone_keep_a_service_serving_then_their_silence_stalls_it():
    # SGLang without per-token series: a prefill chunk line every 12 s keeps it serving; then silence
    def at(t: float, line_at: float) -> ProgressReading:
        return ProgressReading(taken_at=t, engine="sglang", running=1, log_moved_at=line_at)
    verdicts = _run([at(0, 0), at(12, 12), at(24, 24), at(36, 24), at(45, 24)])
    assert [v.state for v in verdicts] == [SERVING, SERVING, SERVING, SERVING, STALLED]


def test_nothing_readable_is_unknown():
    verdict = judge(None, ProgressReading(taken_at=0.0, engine="vllm", running=1), engine_key=KEY)
    assert verdict.state == UNKNOWN


def test_another_engine_starts_a_fresh_memory():
    first = _run([_vllm(BUSY, 0.0)])[-1].memory
    verdict = judge(first, _vllm(BUSY, 60.0), engine_key="vllm-tiny@TP1.service:999")
    assert verdict.state == SERVING


def test_memory_round_trips_through_json_and_refuses_junk():
    memory = _run([_vllm(BUSY, 0.0)])[-1].memory
    assert ProgressMemory.from_json(memory.to_json()) == memory
    assert ProgressMemory.from_json({"state": 1}) is None
    assert ProgressMemory.from_json([1, 2]) is None


def test_json_shape_is_the_issues():
    verdict = _run([_vllm(BUSY, t) for t in (0.0, 25.0)])[-1]
    doc = verdict.to_json()
    assert set(doc) == {"state", "since", "last_progress_at", "pending", "reason", "ranks", "evidence"}
    assert doc["pending"] == {"running": 4, "waiting": 0, "ours": 0} and doc["evidence"] is None


def test_one_rank_idle_while_the_rest_spin_is_named():
    gpus = [GpuReading(i, 0 if i == 3 else 100, 40.0 if i == 3 else 61.0) for i in range(8)]
    names, words = rank_words(gpus)
    assert names == ("GPU 3",)
    assert words.startswith("GPU 3 idle at 0%") and "7 GPUs spin at 100% near idle power" in words


def test_all_ranks_spinning_look_alike():
    names, words = rank_words([GpuReading(i, 96, 15.0, node="gpu-node-2") for i in range(4)])
    assert names == () and "all ranks look alike" in words and "never completes" in words


def test_no_gpu_reading_says_so():
    assert rank_words([GpuReading(0, None)]) == ((), "no GPU reading of the service's ranks")


def test_a_stall_ends_only_when_tokens_move():
    # the canary named it (running gauge at 0); the next reading has nothing pending: still stalled
    verdicts = _run([_vllm(IDLE_TEXT, 0.0), _vllm(IDLE_TEXT, 80.0, canary_timed_out_s=20.0), _vllm(IDLE_TEXT, 90.0)])
    assert [v.state for v in verdicts] == [IDLE, STALLED, STALLED]
    moved = IDLE_TEXT.replace('generation_tokens_total{engine="0",model_name="tiny-moe"} 40.0',
                              'generation_tokens_total{engine="0",model_name="tiny-moe"} 41.0')
    assert moved != IDLE_TEXT
    after = judge(verdicts[-1].memory, _vllm(moved, 95.0), engine_key=KEY)
    assert after.state == SERVING
