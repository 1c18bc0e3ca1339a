"""Issue 30 C9: a probe level that ran through a stall (its longest gap between two tokens of a stream,
its max ITL, is 30 s or more) measured the stall, not the layout: it is stored failed with why, never merged
into the layout's figures; and `results` says when it compares TPOT at different concurrencies."""

from __future__ import annotations

from pathlib import Path

from console.commands.probe_output import summary_lines
from console.commands.results import human
from console.config.loader import load_config
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.probe_metrics import ProbeResult, RequestResult, summarize
from console.ops.explore.results_report import service_results
from console.ops.explore.results_store import ResultsStore

CONFIG = Path(__file__).resolve().parent.parent / "fixtures" / "configs" / "minimal.toml"


def _level(layout: str, concurrency: int, taken_at: float, *, gap_s: float = 0.05) -> ProbeResult:
    """A level of `concurrency` streams of 100 tokens, one of whose gaps lasts `gap_s`."""
    gaps = (0.05,) * 98 + (gap_s,)
    requests = [RequestResult(True, 256, 100, ttft_s=0.2, itl_s=gaps, e2e_s=0.2 + sum(gaps))
                for _ in range(concurrency)]
    summary = summarize(requests, 0.2 + sum(gaps), concurrency=concurrency)
    return ProbeResult("gpu-node-1", "kimi", layout, "sglang", "kimi", summary, taken_at)


def test_a_level_through_a_stall_is_failed_with_why():
    stalled = _level("TP8", 8, 2.0, gap_s=142.646)
    assert not stalled.summary.ok
    line = stalled.to_json()
    assert line["outcome"] == "failed" and line["max_itl_ms"] == 142646.0
    assert line["why"].startswith("stalled: a stream went 142.6 s without a token (max ITL 142646 ms")
    assert _level("TP8", 8, 1.0, gap_s=2.0).to_json()["why"] is None  # a slow step is no stall
    assert summary_lines(stalled)[-2].startswith("FAILED level, stored failed: stalled: a stream went 142.6 s")


def test_results_never_merges_a_stalled_level_and_says_why(tmp_path):
    config = load_config(CONFIG)
    host = config.hosts[0]
    store = ResultsStore(tmp_path / "state.db")
    try:
        options = ProbeOptions(concurrency=(8,))
        good = _level("TP8", 8, 1.0)
        store.add_probe(good, options)
        store.add_probe(_level("TP8", 8, 2.0, gap_s=142.646), options)  # newer, through a stall
        res = service_results(store, host, host.services[0])
    finally:
        store.close()
    (row,) = res.rows
    assert row.outcome == "failed" and row.why.startswith("stalled: a stream went 142.6 s")
    assert row.levels[8].output_throughput == good.summary.output_throughput  # the measurement, not the stall
    assert row.to_json()["why"] == row.why
    text = "\n".join(human(res))
    assert "failed (stalled)" in text and "TP8: stalled: a stream went 142.6 s" in text


def test_results_says_when_tpot_is_at_different_concurrencies(tmp_path):
    config = load_config(CONFIG)
    host = config.hosts[0]
    store = ResultsStore(tmp_path / "state.db")
    try:
        store.add_probe(_level("TP8", 8, 1.0), ProbeOptions(concurrency=(8,)))
        store.add_probe(_level("EP8", 1, 2.0), ProbeOptions(concurrency=(1,)))
        res = service_results(store, host, host.services[0])
    finally:
        store.close()
    lines = human(res)
    assert any(line.startswith("  note: TTFT and TPOT are at each layout's top concurrency (c=8 for TP8, c=1 for EP8)")
               for line in lines), lines
    tp8 = next(line for line in lines if " TP8 " in line)
    assert tp8.count("@c=8") == 2  # TTFT and TPOT both say their concurrency
