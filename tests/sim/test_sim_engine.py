"""The simulated engine as a real process: its start-up lines, HTTP readiness, ledger and failures.

Every test starts `python -m console.sim.sglang` at a small time scale on a free loopback port and
reads its stdout live, so the assertions see what the console's journal would see.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sim_fixtures import KIMI, REPO, free_port
from waiting import wait_for

from console.domain.phases import PhaseTracker
from console.domain.triage.triager import triage_lines
from console.domain.values import Engine, FindingClass, Phase
from console.sim.ledger import read_processes, read_snapshot


class EngineProcess:
    """`python -m console.sim.sglang ...` with its stdout collected line by line in a thread."""

    def __init__(self, ledger: Path, *flags: str, port: int | None = None, scale: float = 0.05,
                 model: Path = KIMI, env: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.ledger = ledger
        env = dict(os.environ, SERVE_CONSOLE_SIM_TIME_SCALE=str(scale), PYTHONUNBUFFERED="1", **(env or {}))
        argv = [sys.executable, "-m", "console.sim.sglang", "--model-path", str(model),
                "--host", "127.0.0.1", "--port", str(self.port), "--ledger-dir", str(ledger), *flags]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=REPO, env=env)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, needle: str, timeout_s: float = 20.0) -> int:
        """Index of the first line containing `needle`; fails the test on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for i, line in enumerate(self.lines):
                    if needle in line:
                        return i
                if not self._reader.is_alive():
                    raise AssertionError(f"engine exited before {needle!r}:\n" + "\n".join(self.lines[-30:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {needle!r} within {timeout_s}s:\n" + "\n".join(self.lines[-30:]))
                self._cond.wait(min(left, 0.2))

    def wait_exit(self, timeout_s: float = 20.0) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def terminate(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def run_failing(ledger: Path, *flags: str, **kwargs) -> EngineProcess:
    """Run the engine until it exits, which must be with status 1; killed if the wait fails."""
    eng = EngineProcess(ledger, *flags, **kwargs)
    try:
        assert eng.wait_exit() == 1
    finally:
        eng.kill()
    return eng


def http_status(url: str, *, data: bytes | None = None, timeout_s: float = 2.0) -> int | None:
    """The HTTP status of a request, or None when the connection is refused."""
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError):
        return None


def http_body(url: str, *, data: bytes | None = None, timeout_s: float = 10.0) -> str:
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return resp.read().decode()


MILESTONES = [
    "server_args=ServerArgs(",
    "Init torch distributed begin.",
    "Init torch distributed ends. mem usage=",
    "Load weight begin. avail mem=",
    "Loading safetensors checkpoint shards:   0% Completed | 0/64",
    "Loading safetensors checkpoint shards: 100% Completed | 64/64",
    "Load weight end. elapsed=",
    "KV Cache is allocated. #tokens: ",
    "Memory pool end. avail mem=",
    "Capture cuda graph begin. This can take up to several minutes. avail mem=",
    "Capture cuda graph end. Time elapsed: ",
    "max_total_num_tokens=",
    "Uvicorn running on http://127.0.0.1:",
    '"GET /get_model_info HTTP/1.1" 200 OK',
    '"POST /generate HTTP/1.1" 200 OK',
    "The server is fired up and ready to roll!",
]


def _used_mib(ledger: Path, gpu: int) -> int:
    snap = read_snapshot(ledger)
    return next(g.used_mib for g in snap.gpus if g.index == gpu)


def _running(eng: EngineProcess) -> float:
    metrics = http_body(eng.url("/metrics"))
    return float(next(x for x in metrics.splitlines() if x.startswith("sglang:num_running_reqs{")).split()[-1])


def test_ep8_starts_like_sglang_and_serves(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    # The environment's time scale (0.05) overrides --time-scale: at 100 this test would time out.
    eng = EngineProcess(ledger, "--tp-size", "8", "--ep-size", "8", "--time-scale", "100", "--enable-metrics")
    try:
        eng.wait_for("Load weight begin")
        assert http_status(eng.url("/v1/models")) is None, "the port must be refused while loading"
        readings, busy = [], []

        def sample() -> bool:  # nvidia-smi's view of GPU 0, read until the weights are in
            gpu0 = read_snapshot(ledger).gpus[0]
            readings.append(gpu0.used_mib)
            busy.append(gpu0.util_pct)
            return any("Load weight end" in line for line in eng.lines)

        wait_for(sample, "the engine's Load weight end line")
        assert max(busy) >= 30  # nvidia-smi shows the GPUs busy while they load
        growth = sorted(set(readings))
        assert len(growth) >= 3 and readings == sorted(readings), readings
        assert readings[0] < 20_000 < 60_000 < _used_mib(ledger, 0)

        seen = {"warm-up": False, "models with health": None}

        def healthy() -> bool:  # the warm-up window: /v1/models answers while /health still says 503
            models = http_status(eng.url("/v1/models"), timeout_s=1)
            health = http_status(eng.url("/health"), timeout_s=1)
            seen["warm-up"] |= models == 200 and health == 503
            if health == 200:
                seen["models with health"] = models == 200
            return health == 200

        wait_for(healthy, "/health to answer 200", interval_s=0.002)
        assert seen == {"warm-up": True, "models with health": True}
        eng.wait_for("The server is fired up and ready to roll!")

        text = eng.text()
        positions = [text.find(needle) for needle in MILESTONES]
        assert -1 not in positions, [n for n, p in zip(MILESTONES, positions, strict=True) if p < 0]
        assert positions == sorted(positions)
        assert "[" in eng.lines[1] and " TP3 EP3] " in text and "type=KimiK25ForConditionalGeneration" in text

        tracker = PhaseTracker(Engine.SGLANG)
        phases = []
        for line in eng.lines:
            event = tracker.feed(line, 0.0)
            if event is not None and (not phases or phases[-1] != event.phase):
                phases.append(event.phase)
        assert phases == [Phase.STARTING, Phase.INIT_DISTRIBUTED, Phase.LOADING_WEIGHTS, Phase.KV_CACHE,
                          Phase.CUDA_GRAPHS, Phase.HTTP_UP, Phase.WARMING_UP, Phase.READY]

        body = json.dumps({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5,
                           "stream": True}).encode()
        stream = http_body(eng.url("/v1/chat/completions"), data=body)
        events = [chunk[len("data: "):] for chunk in stream.split("\n\n") if chunk.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 5
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"

        plain = json.loads(http_body(eng.url("/v1/completions"),
                                     data=json.dumps({"prompt": "hi", "max_tokens": 3}).encode()))
        assert plain["usage"]["completion_tokens"] == 3 and plain["choices"][0]["text"]
        for bad in (b"{not json", b'{"prompt": "x", "max_tokens": "many"}', b"[1, 2]"):
            assert http_status(eng.url("/v1/completions"), data=bad) == 400
        assert http_status(eng.url("/v1/chat/completions"), data=b'{"messages": []}') == 400
        metrics = http_body(eng.url("/metrics"))
        line = next(x for x in metrics.splitlines()
                    if x.startswith('sglang:generation_tokens_total{model_name="moonshotai/Kimi-K2.6"}'))
        assert float(line.split()[-1]) == 8 + 5 + 3  # warm-up, stream, plain
        assert "# TYPE sglang:num_running_reqs gauge" in metrics

        # A client that hangs up mid-stream ends its request: the engine goes back to idle.
        conn = http.client.HTTPConnection("127.0.0.1", eng.port, timeout=5)
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 5000,
                                                                 "stream": True}))
        resp = conn.getresponse()
        assert resp.readline().startswith(b"data: ")
        assert _running(eng) == 1
        conn.close()
        wait_for(lambda: _running(eng) == 0, "the closed stream's request to leave the running count")

        # SIGTERM stops the engine at once, even with a long generation in flight.
        conn = http.client.HTTPConnection("127.0.0.1", eng.port, timeout=5)
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 100_000,
                                                                 "stream": True}))
        assert conn.getresponse().readline().startswith(b"data: ")
        eng.proc.send_signal(signal.SIGTERM)
        assert eng.wait_exit(timeout_s=10) == 0
        conn.close()
        assert "INFO:     Shutting down" in eng.text()
        assert read_processes(ledger) == [] and not list(ledger.glob("proc-*.json"))
    finally:
        eng.kill()


def test_tp4_ep2_runs_out_of_memory_on_gpu_2(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    eng = run_failing(ledger, "--tp-size", "4", "--ep-size", "2", scale=0.02)
    findings = [f for f in triage_lines(eng.lines) if f.cls is FindingClass.CUDA_OOM]
    assert findings, eng.text()[-3000:]
    oom = findings[0].oom
    assert oom is not None and oom.gpu == 2 and oom.tried_bytes == 672 * 2**20
    assert f"{oom.total_bytes / 2**30:.2f}" == "94.97"
    # The figures are one rank's true state: free + in use = capacity (to the printed precision).
    assert abs(oom.free_bytes + oom.in_use_bytes - oom.total_bytes) < 0.01 * 2**30
    assert oom.free_bytes < oom.tried_bytes
    assert 0.5 * 2**30 < oom.in_use_bytes - oom.allocated_bytes - oom.reserved_unallocated_bytes < 1.2 * 2**30
    assert "[" in eng.text() and " TP2 EP1] Scheduler hit an exception: Traceback" in eng.text()
    assert eng.lines[-1].endswith("Received sigquit from a child process. It usually means the child failed.")
    last_bar = [x for x in eng.lines if x.startswith("Loading safetensors checkpoint shards:")][-1]
    elapsed = last_bar.split("[", 1)[1].split("<", 1)[0]
    assert elapsed in ("00:13", "00:14", "00:15"), last_bar  # story time: ~15 s into loading
    assert not list(ledger.glob("proc-*.json"))


def test_oom_names_the_cuda_device_while_the_ledger_books_the_physical_card(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    eng = EngineProcess(ledger, "--tp-size", "4", "--ep-size", "2", scale=0.02,
                        env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    try:
        eng.wait_for("Loading safetensors checkpoint shards:")
        used = [g.used_mib for g in read_snapshot(ledger).gpus]
        assert used[:4] == [0, 0, 0, 0] and min(used[4:]) > 0
        assert eng.wait_exit() == 1
    finally:
        eng.kill()
    oom = next(f.oom for f in triage_lines(eng.lines) if f.cls is FindingClass.CUDA_OOM)
    assert oom is not None and oom.gpu == 2  # CUDA's device 2 is nvidia-smi's GPU 6 here


def test_memory_another_process_holds_is_not_free(tmp_path: Path) -> None:
    from console.sim.ledger import ProcLedger, ensure_inventory

    ledger = tmp_path / "ledger"
    ensure_inventory(ledger, 8, 97887, host="gpu-node-1")
    orphan = ProcLedger(ledger, name="python3")  # this test process plays an orphaned engine on GPU 3
    orphan.set(3, used_mib=60_000)
    orphan.flush()
    try:
        eng = run_failing(ledger, "--tp-size", "8", "--ep-size", "8", scale=0.02)
    finally:
        orphan.remove()
    oom = next(f.oom for f in triage_lines(eng.lines) if f.cls is FindingClass.CUDA_OOM)
    assert oom is not None and oom.gpu == 3
    gap = oom.total_bytes - oom.free_bytes - oom.in_use_bytes
    assert abs(gap - 60_000 * 2**20) < 0.02 * 2**30  # the orphan's share, to the printed precision


@pytest.mark.parametrize(
    ("flags", "cls", "text"),
    [
        (["--fail", "nccl"], FindingClass.NCCL_TIMEOUT,
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1"),
        (["--fail", "port"], FindingClass.PORT_IN_USE, "[Errno 98] error while attempting to bind on address"),
        (["--fail", "kv"], FindingClass.KV_CACHE_TOO_SMALL,
         "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
        # Not injected: 70% of 94.97 GiB cannot hold 73 GiB of weights plus a KV pool.
        (["--mem-fraction-static", "0.7"], FindingClass.KV_CACHE_TOO_SMALL,
         "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
        (["--fail", "cuda_graph"], FindingClass.CUDA_GRAPH, "Exception: Capture cuda graph failed: "),
    ],
    ids=["nccl", "port", "kv", "kv-real", "cuda_graph"],
)
def test_failures_print_the_engines_text_and_exit_1(
    tmp_path: Path, flags: list[str], cls: FindingClass, text: str
) -> None:
    eng = run_failing(tmp_path / "ledger", "--tp-size", "8", *flags, scale=0.02)
    assert text in eng.text()
    assert cls in {f.cls for f in triage_lines(eng.lines)}, eng.text()[-2000:]
    assert "The server is fired up" not in eng.text()
    if "cuda_graph" in flags:
        assert "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)" in eng.text()
    assert not list((tmp_path / "ledger").glob("proc-*.json"))


def test_a_port_really_in_use_fails_after_loading(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        eng = run_failing(tmp_path / "ledger", "--tp-size", "8", "--pp-size", "1", port=port, scale=0.02)
    out = eng.text()
    assert out.index("Capture cuda graph end") < out.index(
        f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
        "address already in use")


def test_sigterm_while_loading_frees_the_gpus(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    eng = EngineProcess(ledger, "--pp-size", "8", scale=0.15)
    try:
        eng.wait_for("Loading safetensors checkpoint shards:")
        wait_for(lambda: _used_mib(ledger, 7) >= 2000, "GPU 7 to hold 2,000 MiB of weights")
        assert " PP7] Load weight begin" in eng.text()
        assert eng.terminate() == 0
    finally:
        eng.kill()
    assert "Uvicorn running" not in eng.text()
    assert all(g.used_mib == 0 for g in read_snapshot(ledger).gpus)


def test_bad_layouts_fail_with_one_reason(tmp_path: Path) -> None:
    eng = run_failing(tmp_path / "ledger", "--tp-size", "4", "--ep-size", "3")
    assert "AssertionError: --ep-size 3 must divide --tp-size 4" in eng.text()
    eng = run_failing(tmp_path / "ledger", "--tp-size", "16")
    assert " TP8] Scheduler hit an exception" in eng.text()  # the first rank without a GPU
    assert "RuntimeError: CUDA error: invalid device ordinal" in eng.text()
    eng = run_failing(tmp_path / "ledger", model=tmp_path / "missing.json")
    assert eng.lines == [f"Error: {tmp_path / 'missing.json'}: no such model config"]
    (tmp_path / "a-file").write_text("")
    eng = run_failing(tmp_path / "a-file" / "ledger")
    assert eng.lines[-1].startswith("Error: cannot write the simulated GPU ledger in ")


def test_metrics_are_served_only_with_enable_metrics(tmp_path: Path) -> None:
    eng = EngineProcess(tmp_path / "ledger", "--tp-size", "8", scale=0.02)
    try:
        eng.wait_for("The server is fired up and ready to roll!")
        assert http_status(eng.url("/metrics")) == 404  # as SGLang without --enable-metrics
        assert http_status(eng.url("/health")) == 200
    finally:
        eng.terminate()


def test_unknown_sglang_flags_are_named_and_ignored(tmp_path: Path) -> None:
    eng = run_failing(tmp_path / "ledger", "--tp-size", "8", "--enable-mixed-chunk",
                      "--speculative-algorithm", "EAGLE", "--fail", "kv", scale=0.01)
    assert "WARNING: the simulated engine accepts and ignores --enable-mixed-chunk --speculative-algorithm" \
        in eng.text()
    assert "Not enough memory" in eng.text()


def test_engine_import_graph_is_stdlib_aiohttp_and_domain() -> None:
    code = ("import sys, console.sim.sglang, console.sim.http_server, console.sim.sglang.startup, "
            "console.sim.generation; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'textual', 'platformdirs', 'tomli', 'asyncssh', 'pynvml', 'rich'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_decode_rates_follow_the_seed_and_saturate() -> None:
    from console.domain.layout import Layout
    from console.sim.generation import aggregate_ceiling, decode_rate_c1, per_request_rate

    assert decode_rate_c1(Layout(tp=8)) == 26.3
    assert decode_rate_c1(Layout(pp=8)) == 36.9
    assert decode_rate_c1(Layout(tp=8, ep=8)) == 65.3
    tp4ep2 = decode_rate_c1(Layout(tp=4, ep=2))
    assert decode_rate_c1(Layout(tp=4)) < tp4ep2 < decode_rate_c1(Layout(tp=8, ep=8)) * 1.2
    ep8 = Layout(tp=8, ep=8)
    per_req = [per_request_rate(ep8, c) for c in (1, 2, 8, 64, 512)]
    assert per_req == sorted(per_req, reverse=True)
    totals = [c * per_request_rate(ep8, c) for c in (1, 8, 64, 512)]
    assert totals == sorted(totals) and totals[-1] < aggregate_ceiling(ep8) == pytest.approx(961.0)


def test_rank_prefixes_follow_sglang() -> None:
    from console.domain.layout import Layout
    from console.sim.logfmt import build_ranks

    assert [r.prefix for r in build_ranks(Layout(tp=4, ep=2))] == [" TP0 EP0", " TP1 EP0", " TP2 EP1",
                                                                 " TP3 EP1"]
    assert build_ranks(Layout(pp=8))[3].prefix == " PP3"
    assert build_ranks(Layout())[0].prefix == ""
    assert build_ranks(Layout(tp=8, dp=4, dp_attention=True))[5].prefix == " DP2 TP5"
    replicas = build_ranks(Layout(tp=2, dp=2))
    assert [(r.gpu, r.prefix) for r in replicas] == [(0, " DP0 TP0"), (1, " DP0 TP1"), (2, " DP1 TP0"),
                                                     (3, " DP1 TP1")]


def test_cuda_device_mapping_follows_cuda_visible_devices() -> None:
    from console.domain.layout import Layout
    from console.sim.engine_args import cuda_devices
    from console.sim.logfmt import build_ranks

    uuids = [f"GPU-{i}aaa-0000" for i in range(8)]
    assert cuda_devices(None, 8) == list(range(8))
    assert cuda_devices(("4", "5", "6", "7"), 8, uuids) == [4, 5, 6, 7]
    assert cuda_devices(("GPU-3aaa", "1"), 8, uuids) == [3, 1]
    assert cuda_devices(("2", "9", "3"), 8, uuids) == [2]  # the runtime stops at the first bad entry
    assert cuda_devices(("GPU-",), 8, uuids) == []  # an ambiguous prefix names no card
    assert [r.gpu for r in build_ranks(Layout(tp=4), base_gpu_id=4)] == [4, 5, 6, 7]
    assert [r.index for r in build_ranks(Layout(tp=4), base_gpu_id=4)] == [0, 1, 2, 3]


def test_a_client_hanging_up_mid_stream_prints_no_traceback(tmp_path: Path) -> None:
    """Issue 30 E21: uvicorn (the real engines' server) prints nothing when a client hangs up mid-stream;
    the simulated engine's aiohttp printed an `Error handling request` traceback, which triage then read
    as an exception of a running engine and, at a later SIGKILL, as its cause."""
    eng = EngineProcess(tmp_path / "ledger", "--tp-size", "8", "--enable-metrics")
    try:
        eng.wait_for("The server is fired up and ready to roll!", timeout_s=60)
        for _ in range(2):  # a second hang-up too: aiohttp reports the write to a closing transport
            conn = http.client.HTTPConnection("127.0.0.1", eng.port, timeout=5)
            conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 5000,
                                                                     "stream": True}))
            assert conn.getresponse().readline().startswith(b"data: ")
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
            wait_for(lambda: _running(eng) == 0, "the hung-up stream to end on the engine's side")
            assert _running(eng) == 0
        assert http_status(eng.url("/health")) == 200
        eng.wait_for('"GET /health HTTP/1.1" 200', timeout_s=30)
        text = eng.text()
        assert "Traceback" not in text and "Error handling request" not in text, text[-3000:]
        assert not [f for f in triage_lines(eng.lines) if f.fatal]
    finally:
        eng.kill()
