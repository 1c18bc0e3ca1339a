"""Ranking layouts from their probe lines: the pick rules, the Pareto frontier, the stored history."""

from __future__ import annotations

import pytest

from console.errors import UsageError
from console.ops.explore.results_table import Pick, best_layout, levels_of, pareto_frontier, parse_pick, score


def line(c: int, agg: float, per_user: float, p99_ttft: float) -> dict:
    return {"concurrency": c, "output_throughput": agg, "per_user_tokens_per_s": per_user, "p99_ttft_ms": p99_ttft}


# Shaped like the story: EP8 fastest everywhere, TP8 better than PP8 at high concurrency only.
LAYOUTS = {
    "TP8": levels_of([line(1, 26.0, 26.3, 80), line(64, 550.0, 8.6, 400)]),
    "PP8": levels_of([line(1, 36.0, 36.9, 80), line(64, 345.0, 5.4, 150)]),
    "EP8": levels_of([line(1, 63.0, 65.3, 80), line(64, 789.0, 12.4, 500)]),
}


def test_parse_pick():
    assert parse_pick("throughput") == Pick() and parse_pick("c1") == Pick("c1")
    assert parse_pick("ttft-slo:200") == Pick("ttft-slo", 200.0) and str(parse_pick("ttft-slo:200")) == "ttft-slo:200"
    for bad in ("fastest", "ttft-slo:", "ttft-slo:-5", "ttft-slo:x"):
        with pytest.raises(UsageError, match="--pick"):
            parse_pick(bad)


def test_the_pick_rules():
    assert best_layout(LAYOUTS, Pick()) == "EP8"  # the top concurrency's aggregate
    assert best_layout(LAYOUTS, Pick("c1")) == "EP8"
    # Under a 200 ms p99 TTFT only PP8 keeps its concurrency-64 level: 345 beats every c=1 figure.
    assert best_layout(LAYOUTS, Pick("ttft-slo", 200.0)) == "PP8"
    assert score(LAYOUTS["TP8"], Pick("ttft-slo", 50.0)) is None
    assert best_layout({}, Pick()) is None and best_layout({"X": {}}, Pick()) is None


def test_the_newest_line_of_a_level_wins():
    levels = levels_of([line(1, 10.0, 10.0, 80), line(8, 50.0, 7.0, 90), line(1, 12.0, 12.0, 80)])
    assert list(levels) == [1, 8] and levels[1].output_throughput == 12.0


def test_the_pareto_frontier_keeps_only_undominated_points():
    gpus = {"TP8": 8, "PP8": 8, "EP8": 8}
    frontier = [(p.layout, p.concurrency) for p in pareto_frontier(LAYOUTS, gpus)]
    assert frontier == [("EP8", 1), ("EP8", 64)]  # EP8 beats the others on both axes at each level
    # Half the GPUs for the same tok/s: TP4 at 64 joins the frontier on tok/s per GPU.
    more = {**LAYOUTS, "TP4": levels_of([line(64, 700.0, 10.0, 300)])}
    frontier = pareto_frontier(more, {**gpus, "TP4": 4})
    assert [(p.layout, p.concurrency) for p in frontier] == [("EP8", 1), ("EP8", 64), ("TP4", 64)]
    assert frontier[-1].tokens_per_s_per_gpu == pytest.approx(175.0)
