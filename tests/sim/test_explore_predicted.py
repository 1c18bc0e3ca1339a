"""Explore by prediction on a simulated host shaped like the demo (8x 96 GB RTX PRO 6000, Kimi K2.6):
the order, the pruning by optimistic bound, the receipts and the layout left running. The simulated
engines keep their own speeds (console/sim/generation.py); the model never reads them."""

from __future__ import annotations

import pytest
from sim_fixtures import EP8, TP4EP2, TP8, sim_host_config

from console.domain.layout import Layout
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.report import ExploreOptions
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.results_table import levels_of, score
from console.ops.explore.sweep import Explore

LAYOUTS = (
    TP8,
    ("PP8", Layout(pp=8)),
    EP8,
    ("TP8 EP4", Layout(tp=8, ep=4)),
    ("TP4 PP2", Layout(tp=4, pp=2)),
    ("TP2 PP4", Layout(tp=2, pp=4)),
    TP4EP2,
)
PROBE = ProbeOptions(concurrency=(1, 8), input_len=16, output_len=40, warmup=0)


async def test_explore_by_prediction_orders_prunes_and_keeps_receipts(sim_hosts):
    host = sim_hosts(sim_host_config(layout_specs=LAYOUTS))
    audit = sim_hosts.audit()
    store = ResultsStore.beside(audit)
    names = tuple(name for name, _ in LAYOUTS)
    run = Explore(host, host.config.services[0], audit=audit, store=store)
    result = await run.run(ExploreOptions(names, PROBE, by_prediction=True))
    reports = {r.layout: r for r in result.layouts}
    assert set(reports) == set(names)
    # Every layout carries its prediction, made before it ran; the order is the predicted one.
    assert all(r.predicted for r in result.layouts)
    assert result.layouts[0].predicted[-1]["calibrated"] is False  # nothing measured before the first
    assert reports["TP4 EP2"].outcome == "skipped"  # fit's oom is never started, whatever its speed
    measured = [r for r in result.layouts if r.outcome == "measured"]
    best = max(score(levels_of(r.probes), result.pick) or 0 for r in measured)
    for r in result.layouts:
        if r.outcome == "pruned":
            assert r.probes == () and r.switch_s == 0.0
            assert r.predicted[-1]["range"]["high"] < best
            assert "pruned: predicted at most" in r.failure["summary"]
    assert result.best is not None and result.left_running == result.best
    # A receipt per measured level: prediction, measurement, error, the host's fingerprint.
    receipts = store.receipts(host=host.config.name, service="k26")
    assert len(receipts) == 2 * len(measured)
    for rec in receipts:
        assert rec.fingerprint["gpu"].startswith("NVIDIA RTX PRO 6000")
        assert rec.fingerprint["engine"] == "sglang"
        assert rec.predicted["concurrency"] == rec.concurrency
        measured_tpot = rec.measured["tpot_ms"]
        # the stored prediction is rounded to 0.001 ms, the error was taken before rounding
        assert rec.tpot_error == pytest.approx(rec.predicted["tpot_ms"] / measured_tpot - 1, abs=2e-4)


def test_the_explore_table_puts_predicted_beside_measured() -> None:
    from console.commands.explore import final_lines
    from console.ops.explore.report import ExploreResult, LayoutReport
    from console.ops.explore.results_table import Pick

    probe = {
        "concurrency": 1,
        "output_throughput": 60.0,
        "per_user_tokens_per_s": 61.5,
        "completed": 4,
        "failed": 0,
    }
    predicted = ({"concurrency": 1, "per_request_tok_s": 37.04, "output_tok_s": 36.9},)
    measured = LayoutReport("EP8", "measured", None, probes=(probe,), predicted=predicted)
    pruned = LayoutReport("PP8", "pruned", None, {"summary": "pruned: ..."}, predicted=predicted)
    result = ExploreResult(1, "demo", "k26", (measured, pruned), "EP8", "EP8", Pick(), None)
    lines = final_lines(result)
    assert "predicted" in lines[1]
    ep8 = next(line for line in lines if " EP8 " in line)
    assert "61.5" in ep8 and "~37.0" in ep8 and "~36.9" in ep8
    pp8 = next(line for line in lines if " PP8 " in line)
    assert "pruned" in pp8 and "~37.0" in pp8
