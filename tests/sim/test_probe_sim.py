"""The probe against the simulated engine: it measures the story's rates, whatever the time scale."""

from __future__ import annotations

import asyncio

import pytest
from sim_fixtures import EP8, TP8, logged, sim_host_config, until_logged

from console.domain.layout import Layout
from console.ops.explore.probe import ProbeRefused, probe_service
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.results_store import ResultsStore
from console.ops.switch.orchestrate import switch_layout

PP8 = ("PP8", Layout(pp=8))
SEED_C1 = {"TP8": 26.3, "PP8": 36.9, "EP8": 65.3}
#: The `probe --json` keys the issue lists, every one present on every line.
PROBE_KEYS = (
    "event host service layout engine concurrency request_rate num_prompts completed failed duration_s "
    "total_input_tokens total_output_tokens request_throughput output_throughput total_token_throughput "
    "mean_ttft_ms median_ttft_ms p99_ttft_ms mean_tpot_ms median_tpot_ms p99_tpot_ms mean_itl_ms "
    "median_itl_ms p95_itl_ms p99_itl_ms mean_e2el_ms median_e2el_ms p99_e2el_ms"
).split()


async def test_concurrency_1_rates_are_the_seeds_within_3_percent(sim_hosts):
    # One simulated host per layout, probed side by side (at the tests' fast start-up time scale).
    hosts = {spec[0]: sim_hosts(sim_host_config(f"sim-{spec[0].lower()}", layout_specs=(spec,)))
             for spec in (TP8, PP8, EP8)}
    store = ResultsStore(sim_hosts.state_root / "audit.sqlite3")
    options = ProbeOptions(concurrency=(1,), num_prompts=3, input_len=32, output_len=40, warmup=1)

    async def measure(name: str):
        host = hosts[name]
        result = await switch_layout(host, None, name, timeout_s=60)
        assert result.outcome == "ready", result.reason
        return name, await probe_service(host, host.config.services[0], options, store=store)

    measured = dict(await asyncio.gather(*(measure(n) for n in hosts)))
    for name, levels in measured.items():
        (level,) = levels
        line = level.to_json()
        assert [k for k in PROBE_KEYS if k not in line] == []
        assert line["event"] == "probe" and line["layout"] == name and line["engine"] == "sglang"
        assert line["completed"] == 3 and line["failed"] == 0 and line["total_output_tokens"] == 120
        assert line["output_tokens_from"] == "usage"
        rate = line["per_user_tokens_per_s"]
        assert rate == pytest.approx(SEED_C1[name], rel=0.03), (name, rate)
        assert 1000 / line["median_itl_ms"] == pytest.approx(SEED_C1[name], rel=0.03)
    assert len(store.probes()) == 3 and {p.layout for p in store.probes()} == set(SEED_C1)
    store.close()


async def test_a_probe_needs_a_ready_layout(sim_hosts):
    host = sim_hosts()
    with pytest.raises(ProbeRefused, match="no layout is running"):
        await probe_service(host, host.config.services[0], ProbeOptions())


async def test_a_chat_probe_at_concurrency_8_follows_the_engines_model(ep8_up, sim_hosts):
    from console.sim.generation import per_request_rate

    host = await ep8_up(layout_specs=(EP8,))
    options = ProbeOptions(concurrency=(8,), num_prompts=8, input_len=16, output_len=30, warmup=0,
                           endpoint="chat")
    (level,) = await probe_service(host, host.config.services[0], options)
    s = level.summary
    assert s.completed == 8 and s.tokens_from == "usage" and s.total_output_tokens == 240
    assert s.per_user_tokens_per_s == pytest.approx(per_request_rate(EP8[1], 8), rel=0.05)


async def test_an_engine_that_dies_mid_probe_fails_its_requests_without_an_exception(ep8_up, sim_hosts):
    host = await ep8_up(layout_specs=(EP8,))
    service = host.config.services[0]
    options = ProbeOptions(concurrency=(4,), num_prompts=8, input_len=16, output_len=200, warmup=0)
    unit = service.unit_for(service.layout("EP8"))
    before = await logged(host, unit, "Decode batch.")
    probing = asyncio.create_task(probe_service(host, service, options))
    await until_logged(host, unit, "Decode batch.", more_than=before)  # the probe's requests decode
    await host.services.stop(service.unit_for(service.layout("EP8")))
    (level,) = await probing
    s = level.summary
    assert s.failed == 8 and s.completed == 0 and s.errors  # cut streams and refused connections
    assert level.to_json()["mean_ttft_ms"] is None
