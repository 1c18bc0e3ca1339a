"""Beside a probe, the engine's own view of the same level: its TTFT, ITL and tok/s from /metrics."""

from __future__ import annotations

import pytest
from sim_fixtures import EP8, sim_host_config

from console.commands.probe_output import summary_lines
from console.ops.explore.probe import probe_service
from console.ops.explore.probe_load import ProbeOptions


async def test_a_probe_level_carries_the_engines_own_figures(ep8_up, sim_hosts):
    host = await ep8_up(sim_host_config(layout_specs=(EP8,)))
    options = ProbeOptions(concurrency=(2,), num_prompts=4, input_len=32, output_len=40, warmup=1)
    (level,) = await probe_service(host, host.config.services[0], options)
    view = level.engine_view
    assert view is not None
    client_itl_s = level.summary.itl.median_ms / 1000
    # The engine's ITL histogram buckets are coarse (0.015, 0.02, ...): the two views agree to a bucket.
    assert view.itl_p50_s == pytest.approx(client_itl_s, abs=0.005)
    assert view.generation_tokens_per_s is not None and view.generation_tokens_per_s > 0
    line = level.to_json()
    assert line["engine_metrics"]["itl_p50_s"] == pytest.approx(view.itl_p50_s, abs=1e-4)
    assert any("Engine P50 / P99 ITL (ms)" in row for row in summary_lines(level))
    print(f"\nEP8 c=2: client median ITL {client_itl_s * 1000:.1f} ms, engine ITL p50 {view.itl_p50_s * 1000:.1f} ms"
          f" p99 {view.itl_p99_s * 1000:.1f} ms, engine {view.generation_tokens_per_s:.1f} tok/s, client "
          f"{level.summary.output_throughput:.1f} tok/s")
