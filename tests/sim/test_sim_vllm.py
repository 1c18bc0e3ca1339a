"""The simulated vLLM server: its start-up lines and phases, its failures' texts, its HTTP API, and the
switch story on a simulated 4x H100 host (TP4 ready, TP2 forced dies with vLLM's OOM, rolled back).

Failure runs start `python -m console.sim.vllm serve ...` at a small time scale and read all it printed;
the story runs the engine under the simulated host's units, as the demo does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_fixtures import H100_MIB, QWEN, REPO, free_port, qwen_host
from waiting import wait_for

from console.domain.layout import Layout, parse_layout
from console.domain.phases import PhaseTracker
from console.domain.triage.triager import triage_lines
from console.domain.values import Engine, FindingClass, Phase
from console.ops.switch.events import PhaseEvent
from console.ops.switch.orchestrate import switch_layout
from console.sim.ledger import ProcLedger, ensure_inventory
from console.sim.vllm.failures import ENGINE_INIT_FAILED
from console.sim.vllm.logfmt import build_vllm_ranks, worker_name


def run_vllm(tmp_path: Path, *flags: str, port: int | None = None) -> tuple[int, list[str]]:
    """Run the simulated vLLM on 4 simulated H100s until it exits; its exit status and lines."""
    argv = [sys.executable, "-m", "console.sim.vllm", "serve", str(QWEN), "--host", "127.0.0.1",
            "--port", str(port or free_port()), "--gpu-count", "4", "--gpu-total-mib", str(H100_MIB),
            "--ledger-dir", str(tmp_path / "ledger"), *flags]  # fmt: skip
    env = dict(os.environ, SERVE_CONSOLE_SIM_TIME_SCALE="0.02", PYTHONUNBUFFERED="1")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def findings(lines: list[str], cls: FindingClass):
    return [f for f in triage_lines(lines) if f.cls is cls]


def test_tp2_dies_building_the_model_with_vllms_oom_text(tmp_path: Path) -> None:
    code, lines = run_vllm(tmp_path, "-tp", "2")
    text = "\n".join(lines)
    assert code == 1, text[-2000:]
    ooms = findings(lines, FindingClass.CUDA_OOM)
    assert {f.oom.gpu for f in ooms} <= {0, 1} and ooms, text[-2000:]
    oom = ooms[0].oom
    assert f"{oom.total_bytes / 2**30:.2f}" == "79.13"  # what PyTorch reports for an 81559 MiB card
    assert oom.free_bytes < oom.tried_bytes
    assert abs(oom.free_bytes + oom.in_use_bytes - oom.total_bytes) < 0.01 * 2**30
    # vLLM allocates the whole model before reading the checkpoint: no shard is read.
    assert not [x for x in lines if "Loading safetensors checkpoint shards" in x]
    assert "(Worker_TP0 pid=" in text and "] WorkerProc failed to start." in text
    assert "PYTORCH_ALLOC_CONF=expandable_segments:True" in text
    assert any(
        x.startswith("(EngineCore pid=") and x.endswith("EngineCore failed to start.") for x in lines
    )
    assert lines[-1] == ENGINE_INIT_FAILED  # the API server's traceback at exit is bare, as vLLM 0.32's
    tracker = PhaseTracker(Engine.VLLM)
    seen = [ev.phase for x in lines if (ev := tracker.feed(x, 0.0)) is not None]
    assert Phase.LOADING_WEIGHTS in seen and seen[-1] is Phase.FAILED
    assert not list((tmp_path / "ledger").glob("proc-*.json"))


@pytest.mark.parametrize(
    ("flags", "cls", "text"),
    [
        # 70% of 79.13 GiB does not even hold the 55 GiB of weights plus the activation peak.
        (
            ["--gpu-memory-utilization", "0.7"],
            FindingClass.KV_CACHE_TOO_SMALL,
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
        ),
        # 73.5% leaves about 1.2 GiB: fewer tokens than one 40960-token request.
        (
            ["--gpu-memory-utilization", "0.735"],
            FindingClass.KV_CACHE_TOO_SMALL,
            "ValueError: To serve at least one request with the model's max seq len (40960)",
        ),
        (["--fail", "kv"], FindingClass.KV_CACHE_TOO_SMALL, "No available memory for the cache blocks"),
        (["--fail", "port"], FindingClass.PORT_IN_USE, "OSError: [Errno 98] Address already in use"),
    ],
    ids=["no-cache-blocks", "below-max-model-len", "kv-injected", "port-injected"],
)
def test_failures_print_vllms_text_and_exit_1(tmp_path: Path, flags: list[str], cls, text: str) -> None:
    code, lines = run_vllm(tmp_path, "-tp", "4", *flags)
    assert code == 1
    assert text in "\n".join(lines)
    assert findings(lines, cls), "\n".join(lines[-30:])
    assert lines[-1] in (ENGINE_INIT_FAILED, "OSError: [Errno 98] Address already in use")  # bare, at exit


def test_memory_another_process_holds_refuses_the_start(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ensure_inventory(ledger, 4, H100_MIB, "NVIDIA H100 80GB HBM3", host="h100-node")
    orphan = ProcLedger(ledger, name="VLLM::EngineCore")  # this test process plays an orphaned engine core
    orphan.set(2, used_mib=30_000)
    orphan.flush()
    try:
        code, lines = run_vllm(tmp_path, "-tp", "4")
    finally:
        orphan.remove()
    assert code == 1
    assert "Free memory on device (" in "\n".join(lines)
    assert findings(lines, FindingClass.MEMORY_IN_USE)
    assert not [x for x in lines if "Starting to load model" in x]


def test_a_port_really_in_use_fails_before_the_engine_starts(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        code, lines = run_vllm(tmp_path, "-tp", "4", port=sock.getsockname()[1])
    assert code == 1 and findings(lines, FindingClass.PORT_IN_USE)
    assert not [x for x in lines if "EngineCore" in x]


def test_bad_layouts_and_unknown_flags(tmp_path: Path) -> None:
    code, lines = run_vllm(tmp_path, "-tp", "3", "--enable-expert-parallel")
    assert code == 1
    assert lines[-1] == "ValueError: 128 experts are not divisible by EP 3"  # a bare traceback at exit
    code, lines = run_vllm(tmp_path, "-tp", "4", "--fail", "kv", "--frobnicate", "7")
    assert code == 1
    assert any("WARNING" in x and "accepts and ignores --frobnicate" in x for x in lines[:3])


def test_worker_names_follow_vllm() -> None:
    assert [r.prefix for r in build_vllm_ranks(Layout(tp=4, ep=4))] == [
        f"Worker_TP{i}_EP{i}" for i in range(4)
    ]
    assert [r.prefix for r in build_vllm_ranks(parse_layout("TP2 PP2"))] == [
        "Worker_PP0_TP0",
        "Worker_PP0_TP1",
        "Worker_PP1_TP0",
        "Worker_PP1_TP1",
    ]
    assert worker_name(Layout(tp=2, dp=2, ep=4), 1, 0, 1, 3) == "Worker_DP1_TP1_EP3"
    assert worker_name(Layout(), 0, 0, 0, 0) == "Worker"  # 0.32's executor runs a worker even for one GPU


async def test_the_vllm_story_tp4_serves_tp2_forced_ooms_and_rolls_back(sim_hosts) -> None:
    port = free_port()
    host = sim_hosts(qwen_host(port))
    audit = sim_hosts.audit()
    events: list = []
    first = await switch_layout(host, None, "TP4", audit=audit, timeout_s=60, on_event=events.append)
    assert first.outcome == "ready", first.reason
    phases = [e.phase for e in events if isinstance(e, PhaseEvent)]
    expected = [
        Phase.STARTING,
        Phase.INIT_DISTRIBUTED,
        Phase.LOADING_WEIGHTS,
        Phase.KV_CACHE,
        Phase.CUDA_GRAPHS,
        Phase.HTTP_UP,
        Phase.READY,
    ]
    assert [p for p in expected if p in phases] == expected, phases
    snapshot = await host.gpus.sample()
    assert [g.total_mib for g in snapshot.gpus] == [H100_MIB] * 4
    assert all(g.name == "NVIDIA H100 80GB HBM3" and g.used_mib > 70_000 for g in snapshot.gpus)

    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{base}/health") as resp:
            assert resp.status == 200
        async with session.get(f"{base}/v1/models") as resp:
            model = (await resp.json())["data"][0]
        assert model["owned_by"] == "vllm" and model["max_model_len"] == 40960
        body = {
            "model": model["id"],
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 5,
            "stream": True,
        }
        async with session.post(f"{base}/v1/chat/completions", json=body) as resp:
            chunks = [line for line in (await resp.text()).splitlines() if line.startswith("data: ")]
        assert chunks[-1] == "data: [DONE]" and json.loads(chunks[0][6:])["object"] == "chat.completion.chunk"
        async with session.get(f"{base}/metrics") as resp:
            families = {f.name: f for f in text_string_to_metric_families(await resp.text())}
        async with session.post(f"{base}/generate", json={"text": "x"}) as resp:
            assert resp.status == 404  # SGLang's native route is not vLLM's
    generated = families["vllm:generation_tokens"].samples[0]
    assert generated.value >= 5 and generated.labels == {"engine": "0", "model_name": model["id"]}
    assert {
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
    } <= families.keys()

    events.clear()
    result = await switch_layout(
        host, None, "TP2", force=True, audit=audit, timeout_s=60, on_event=events.append
    )
    assert result.outcome == "failed", result.reason
    failure = result.to_json()["failure"]
    assert failure["kind"] == "cuda_oom" and failure["gpu"] in (0, 1)
    assert round(failure["total_bytes"] / 2**30, 2) == 79.13
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py
    assert (
        result.rollback is not None and result.rollback.layout == "TP4" and result.rollback.outcome == "ready"
    )


def test_health_is_200_while_the_engine_lives_and_503_once_it_died(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    port = free_port()
    argv = [sys.executable, "-m", "console.sim.vllm", "serve", str(QWEN), "-tp", "4", "--host", "127.0.0.1",
            "--port", str(port), "--gpu-count", "4", "--ledger-dir", str(tmp_path / "ledger"),
            "--fail", "engine_dead"]  # fmt: skip
    # the core dies when the test says (SIGUSR1, as its `kill -9`), once /health has answered 200
    env = dict(os.environ, SERVE_CONSOLE_SIM_TIME_SCALE="0.05", PYTHONUNBUFFERED="1",
               SERVE_CONSOLE_SIM_DIE_ON_SIGNAL="1")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env
    )
    seen: list[int | None] = []
    try:
        def health() -> int | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code
            except (urllib.error.URLError, ConnectionError):
                return None  # not served before the engine has started, nor after the exit

        def exited() -> bool:  # /health read until the exit
            if proc.poll() is not None:
                return True
            status = health()
            if not seen or seen[-1] != status:
                seen.append(status)
            return False

        wait_for(lambda: exited() or 200 in seen, "the simulated vLLM's /health to answer 200")
        proc.send_signal(signal.SIGUSR1)
        wait_for(exited, "the simulated vLLM to exit after its engine died")
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0  # as the real API server after its engine core died (kill9-systemctl-show.txt)
    answered = [s for s in seen if s is not None]
    assert answered == [200, 503], seen
    lines = out.splitlines()
    assert any("MPClient: engine core exited unexpectedly" in x for x in lines)
    assert any("EngineDeadError: EngineCore encountered an issue." in x for x in lines)


def test_a_vllm_services_unit_runs_vllm_serve_with_its_flags(tmp_path: Path) -> None:
    import dataclasses

    from console.sim.host.units import engine_command, find_unit, layout_args_for

    cfg = qwen_host(8000)
    service = dataclasses.replace(cfg.services[0], url="http://127.0.0.1", mem_fraction=0.85)
    cfg = dataclasses.replace(cfg, services=(service,))
    spec = find_unit(cfg, "vllm-qwen3@tp4ep.service")
    assert spec is not None
    argv = engine_command(cfg, spec, layout_args_for(spec), tmp_path)
    assert argv[1:5] == ["-m", "console.sim.vllm", "serve", str(QWEN)]
    assert argv[5:8] == ["--tensor-parallel-size", "4", "--enable-expert-parallel"]
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.85"
    assert argv[argv.index("--port") + 1] == "8000"  # vLLM's default port when the URL names none
    assert argv[argv.index("--gpu-total-mib") + 1] == str(H100_MIB)
