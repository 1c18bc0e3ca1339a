"""Start-up phases from SGLang and vLLM milestones; ready only from the ready line or /health."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.domain.phases import PhaseTracker
from console.domain.values import Engine, HealthSample, Phase

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
ORDER = list(Phase)


def _events(engine: Engine, name: str):
    tracker = PhaseTracker(engine)
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    events = [e for i, line in enumerate(lines) if (e := tracker.feed(line, float(i))) is not None]
    return tracker, events


def _distinct_phases(events):
    out = []
    for e in events:
        if not out or out[-1] is not e.phase:
            out.append(e.phase)
    return out


# Up to HTTP_UP both engines walk the same phases; only SGLang logs a warm-up request before ready.
_TO_HTTP_UP = [
    Phase.STARTING, Phase.INIT_DISTRIBUTED, Phase.LOADING_WEIGHTS, Phase.KV_CACHE, Phase.CUDA_GRAPHS, Phase.HTTP_UP,
]


@pytest.mark.parametrize(
    ("engine", "name", "phases"),
    [
        (Engine.SGLANG, "sglang_tp8_ready.log", [*_TO_HTTP_UP, Phase.WARMING_UP, Phase.READY]),
        (Engine.VLLM, "vllm_tp4_ready.log", [*_TO_HTTP_UP, Phase.READY]),
    ],
)
def test_ready_start_walks_every_phase_in_order_and_never_back(engine, name, phases):
    tracker, events = _events(engine, name)
    assert _distinct_phases(events) == phases
    positions = [ORDER.index(e.phase) for e in events]
    assert positions == sorted(positions)
    assert tracker.ready
    ready = events[-1]
    assert ready.detail == "ready" and ready.ts > 0


def test_sglang_shard_progress_from_tqdm():
    _, events = _events(Engine.SGLANG, "sglang_tp8_ready.log")
    loading = [e.progress for e in events if e.phase is Phase.LOADING_WEIGHTS]
    assert loading == [0.0, 6 / 64, 13 / 64, 29 / 64, 45 / 64, 58 / 64, 1.0]
    shard = next(e for e in events if e.progress == 29 / 64)
    assert shard.detail == "loading weights 29/64"
    graphs = [e.progress for e in events if e.phase is Phase.CUDA_GRAPHS]
    assert graphs == [0.0, 13 / 52, 26 / 52, 1.0]


def test_event_rank_comes_from_the_prefix():
    _, events = _events(Engine.SGLANG, "sglang_tp4ep2_oom.log")
    init = next(e for e in events if e.phase is Phase.INIT_DISTRIBUTED)
    assert init.rank == "TP0 EP0"


def test_vllm_load_progress():
    _, events = _events(Engine.VLLM, "vllm_tp4_ready.log")
    assert [e.progress for e in events if e.phase is Phase.LOADING_WEIGHTS] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_sglang_uvicorn_startup_complete_is_not_ready():
    tracker, _ = _events(Engine.SGLANG, "sglang_port_in_use.log")
    assert tracker.phase is Phase.CUDA_GRAPHS and not tracker.ready


def test_v1_models_alone_is_never_ready():
    tracker = PhaseTracker(Engine.SGLANG)
    tracker.feed("[2026-05-26 00:03:42] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", 1.0)
    tracker.feed('[2026-05-26 00:03:43] INFO:     127.0.0.1:50514 - "GET /v1/models HTTP/1.1" 200 OK', 2.0)
    assert tracker.phase is Phase.HTTP_UP
    assert tracker.feed_health(HealthSample(taken_at=3.0, status="starting", http_status=503, models_ok=True)) is None
    event = tracker.feed_health(HealthSample(taken_at=4.0, status="ready", http_status=200))
    assert event.phase is Phase.READY and event.ts == 4.0 and tracker.ready


@pytest.mark.parametrize(
    ("engine", "first", "second", "phase"),
    [
        pytest.param(
            Engine.VLLM,
            "(Worker_TP0 pid=1) INFO 05-26 00:05:24 [r.py:1] Starting to load model m...",
            "(APIServer pid=2) INFO:     Application startup complete.",
            Phase.LOADING_WEIGHTS,
            id="vllm-ready-needs-the-api-server-first",
        ),
        pytest.param(
            Engine.SGLANG,
            "[2026-05-26 00:06:05 TP0] Load weight begin. avail mem=93.74 GB",
            "[2026-05-26 00:06:05 TP3] Init torch distributed begin.",
            Phase.LOADING_WEIGHTS,
            id="late-rank-does-not-pull-the-phase-back",
        ),
        pytest.param(
            Engine.VLLM,
            "(APIServer pid=2) INFO 05-26 00:06:17 [a.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
            "(APIServer pid=2) INFO:     Started server process [2961]",
            Phase.HTTP_UP,
            id="uvicorn-started-server-process-is-not-a-unit-start",
        ),
    ],
)
def test_second_line_is_no_event_and_keeps_the_phase(engine, first, second, phase):
    tracker = PhaseTracker(engine)
    tracker.feed(first, 1.0)
    assert tracker.feed(second, 2.0) is None
    assert tracker.phase is phase


def test_failure_then_fresh_start():
    tracker, events = _events(Engine.SGLANG, "sglang_tp4ep2_oom.log")
    assert tracker.phase is Phase.FAILED
    assert events[-1].phase is Phase.FAILED
    # stragglers of the failed start do not revive it
    assert tracker.feed("Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:07<00:08]", 9.0) is None
    event = tracker.feed("May 26 00:07:00 gpu-node-1 systemd[1]: Started sglang-k26-tp4ep2.service - K2.6.", 10.0)
    assert event.phase is Phase.STARTING
    event = tracker.feed("[2026-05-26 00:07:05 TP0 EP0] Init torch distributed begin.", 11.0)
    assert event.phase is Phase.INIT_DISTRIBUTED


def test_ready_then_restart_without_systemd_line():
    tracker, _ = _events(Engine.SGLANG, "sglang_tp8_ready.log")
    assert tracker.feed('[2026-05-26 00:05:00] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK', 1.0) is None
    event = tracker.feed("[2026-05-26 00:09:00 TP0] Init torch distributed begin.", 2.0)
    assert event.phase is Phase.INIT_DISTRIBUTED


def test_restart_loop_alternates_failed_and_starting():
    tracker, events = _events(Engine.SGLANG, "systemd_restart_loop.log")
    assert _distinct_phases(events) == [
        Phase.FAILED, Phase.STARTING, Phase.FAILED, Phase.STARTING, Phase.FAILED
    ]


def test_clean_exit_is_stopped_not_failed():
    tracker = PhaseTracker(Engine.SGLANG)
    tracker.feed("[2026-05-26 00:03:45] The server is fired up and ready to roll!", 1.0)
    assert tracker.feed("x.service: Main process exited, code=exited, status=0/SUCCESS", 2.0) is None
    event = tracker.feed("May 26 01:00:00 gpu-node-1 systemd[1]: x.service: Deactivated successfully.", 3.0)
    assert event.phase is Phase.STOPPED


def test_mark_failed_and_vllm_failures():
    tracker, events = _events(Engine.VLLM, "vllm_ep_oom.log")
    assert tracker.phase is Phase.FAILED
    assert tracker.mark_failed(99.0, "again") is None
    fresh = PhaseTracker(Engine.VLLM)
    event = fresh.mark_failed(5.0, "cuda_oom on TP2", rank="TP2")
    assert (event.phase, event.rank, event.detail) == (Phase.FAILED, "TP2", "cuda_oom on TP2")


@pytest.mark.parametrize("engine", list(Engine))
def test_ordinary_lines_are_no_event(engine):
    tracker = PhaseTracker(engine)
    for line in ["", "hello", "[2026-05-26 00:04:10 TP0] Decode batch. #running-req: 1", "x" * 100_000]:
        assert tracker.feed(line, 1.0) is None
    assert tracker.phase is Phase.STOPPED


def test_vllm_cuda_graph_lines_with_and_without_a_bar():
    tracker = PhaseTracker(Engine.VLLM)
    tracker.feed("(Worker_TP0 pid=1) INFO 05-26 00:06:02 [w.py:1] Available KV cache memory: 62.47 GiB", 1.0)
    event = tracker.feed("INFO 05-26 00:06:03 model_runner.py:1 Capturing cudagraphs for decoding.", 2.0)
    assert event.phase is Phase.CUDA_GRAPHS and event.progress is None
    event = tracker.feed(
        "(Worker_TP0 pid=1) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  52%|█████▏    | 35/67 "
        "[00:03<00:03, 10.21it/s]",
        3.0,
    )
    assert (event.phase, event.progress, event.detail) == (Phase.CUDA_GRAPHS, 35 / 67, "capturing CUDA graphs 35/67")
