"""The simulated SGLang and vLLM over two simulated hosts on this machine: their rendezvous, their start-up
lines, a node that never joins, a worker killed or stopped while the head's /health stays 200 until the
engine's (scaled) watchdog fires, and NCCL RAS's answers.

Each "host" is one engine process with its own GPU ledger, its own ports and its own loopback address
(node 0 on 127.0.0.1, node 1 on 127.0.0.2), and its own NCCL_RAS_ADDR; every process dies with the test
run (PR_SET_PDEATHSIG) and is stopped by its fixture. Time scale 0.02: SGLang's watchdog of 100 s is 2 s.
"""

from __future__ import annotations

import ctypes
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
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_fixtures import KIMI, REPO, free_port
from waiting import WaitTimeout, wait_for

from console.sim.ledger import read_snapshot
from console.sim.process import RANK_PID_OFFSET

QWEN = REPO / "console" / "sim" / "models" / "Qwen--Qwen3-235B-A22B-FP8.json"
SCALE = 0.02
HEAD_IP, WORKER_IP = "127.0.0.1", "127.0.0.2"


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Node:
    """One simulated host's engine process, its output collected line by line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                                     env=env, preexec_fn=_die_with_parent)
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

    def wait_for(self, needle: str, timeout_s: float = 30.0, count: int = 1) -> None:
        """Until `count` lines contain `needle`; fails on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while sum(needle in line for line in self.lines) < count:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    raise AssertionError(f"no {count}x {needle!r}:\n" + "\n".join(self.lines[-25:]))
                self._cond.wait(min(left, 0.2))

    def having(self, needle: str) -> list[str]:
        with self._cond:
            return [line for line in self.lines if needle in line]

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=10)


class Cluster:
    """Node 0 and node 1 of one service, with their HTTP and RAS addresses."""

    def __init__(self, nodes: list[Node], ports: list[int], ras: list[tuple[str, int]], rendezvous_port: int) -> None:
        self.head, self.worker = nodes
        self.ports, self.ras, self.rendezvous_port = ports, ras, rendezvous_port

    def stop(self) -> None:
        for node in (self.head, self.worker):
            node.stop()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVE_CONSOLE_SIM_", "NCCL_RAS", "VLLM_"))}
    return {**env, "SERVE_CONSOLE_SIM_TIME_SCALE": str(SCALE), "PYTHONUNBUFFERED": "1", **extra}


def start_sglang(tmp: Path, layout: list[str], *, head_flags: tuple[str, ...] = (),
                 worker_flags: tuple[str, ...] = (), worker_delay_s: float = 0.0, **worker_env: str) -> Cluster:
    """SGLang over two 8-GPU hosts: `--nnodes 2 --node-rank R --dist-init-addr 127.0.0.1:P`."""
    dist, ports, ras = free_port(), [free_port(), free_port()], [(HEAD_IP, free_port()), (WORKER_IP, free_port())]
    nodes = []
    for rank, ip in enumerate((HEAD_IP, WORKER_IP)):
        argv = [sys.executable, "-m", "console.sim.sglang", "--model-path", str(KIMI), *layout,
                "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"{HEAD_IP}:{dist}",
                "--host", ip, "--port", str(ports[rank]), "--ledger-dir", str(tmp / f"ledger-{rank}"),
                *(worker_flags if rank else head_flags)]
        if rank:
            time.sleep(worker_delay_s)
        nodes.append(Node(argv, _env(NCCL_RAS_ADDR=f"{ras[rank][0]}:{ras[rank][1]}", **(worker_env if rank else {}))))
    return Cluster(nodes, ports, ras, dist)


def start_vllm(tmp: Path, layout: list[str], *, headless: bool = True, **env: str) -> Cluster:
    """vLLM over two 4-GPU hosts: node 1 `--headless`, both `--master-addr 127.0.0.1 --master-port P`."""
    master, ports, ras = free_port(), [free_port(), free_port()], [(HEAD_IP, free_port()), (WORKER_IP, free_port())]
    nodes = []
    for rank, ip in enumerate((HEAD_IP, WORKER_IP)):
        argv = [sys.executable, "-m", "console.sim.vllm", "serve", str(QWEN), *layout, "--gpu-count", "4",
                "--gpu-total-mib", "81559", "--nnodes", "2", "--node-rank", str(rank), "--master-addr", HEAD_IP,
                "--master-port", str(master), "--host", ip, "--port", str(ports[rank]),
                "--ledger-dir", str(tmp / f"ledger-{rank}"), *(["--headless"] if rank and headless else [])]
        nodes.append(Node(argv, _env(NCCL_RAS_ADDR=f"{ras[rank][0]}:{ras[rank][1]}", **env)))
    return Cluster(nodes, ports, ras, master)


def http_status(url: str, timeout_s: float = 3.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def complete_in_background(port: int, max_tokens: int) -> dict:
    """Send a completion from a thread; the dict gets `status` (or `error`) and `done_at` when it ends."""
    outcome: dict = {}

    def send() -> None:
        body = json.dumps({"prompt": "Tell me about clusters", "max_tokens": max_tokens}).encode()
        req = urllib.request.Request(f"http://{HEAD_IP}:{port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                outcome["status"] = resp.status
                resp.read()
        except Exception as exc:  # the server going away mid-request is an outcome here
            outcome["error"] = repr(exc)
        outcome["done_at"] = time.monotonic()

    threading.Thread(target=send, daemon=True).start()
    return outcome


def ras_status(addr: tuple[str, int], verbose: bool = False) -> str:
    """What `ncclras` prints: the client handshake, then STATUS, read until the server closes."""
    with socket.create_connection(addr, timeout=10) as sock:
        sock.sendall(b"CLIENT PROTOCOL 2\n")
        assert sock.recv(64) == b"SERVER PROTOCOL 2\n"
        sock.sendall(b"TIMEOUT 5\n")
        assert sock.recv(64) == b"OK\n"
        sock.sendall(b"VERBOSE STATUS\n" if verbose else b"STATUS\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def wait_ras(addr: tuple[str, int], needle: str, timeout_s: float = 30.0) -> str:
    """The RAS report once it says `needle`."""
    last = {"report": ""}

    def says() -> str | None:
        last["report"] = ras_status(addr)
        return last["report"] if needle in last["report"] else None

    try:
        return wait_for(says, f"RAS at {addr} to say {needle!r}", timeout_s=timeout_s, interval_s=0.1)
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}; its last report:\n{last['report']}") from None


def wait_done(outcome: dict, what: str = "the completion to end") -> None:
    wait_for(lambda: "done_at" in outcome, what, timeout_s=60)


@pytest.fixture(scope="module")
def sglang_tp16(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = start_sglang(tmp_path_factory.mktemp("tp16"), ["--tp-size", "16", "--enable-metrics"])
    try:
        cluster.head.wait_for("The server is fired up and ready to roll!")
        cluster.worker.wait_for("Starting dummy health check server at")
        yield cluster
    finally:
        cluster.stop()


def test_tp16_over_two_hosts_comes_up_with_the_head_serving_and_the_workers_dummy_health(sglang_tp16) -> None:
    head, worker = sglang_tp16.head, sglang_tp16.worker
    for node, first in ((head, 0), (worker, 8)):
        begins = node.having("] Init torch distributed begin.")
        assert sorted(line.split(" TP")[1].split("]")[0] for line in begins) == sorted(
            str(r) for r in range(first, first + 8))
        assert len(node.having("] Init torch distributed ends. mem usage=")) == 8
        assert len(node.having("] Load weight end.")) == 8
    assert "nnodes=2, node_rank=1" in worker.having("server_args=ServerArgs(")[0]
    assert not worker.having("fired up")
    # Node 0 serves the API; node 1 answers SGLang's dummy /health, /health_generate and /ping only.
    head_url, worker_url = f"http://{HEAD_IP}:{sglang_tp16.ports[0]}", f"http://{WORKER_IP}:{sglang_tp16.ports[1]}"
    assert http_status(f"{head_url}/health") == 200
    assert http_status(f"{head_url}/v1/models") == 200
    for path in ("/health", "/health_generate", "/ping", "/metrics"):
        assert http_status(f"{worker_url}{path}") == 200, path
    assert http_status(f"{worker_url}/v1/models") == 404
    # Both nodes size the KV pool alike (the minimum over every node).
    [head_tokens] = {line.split("#tokens: ")[1].split(",")[0] for line in head.having("KV Cache is allocated")}
    [worker_tokens] = {line.split("#tokens: ")[1].split(",")[0] for line in worker.having("KV Cache is allocated")}
    assert head_tokens == worker_tokens


def test_ras_reports_the_healthy_job_from_either_host(sglang_tp16) -> None:
    for addr in sglang_tp16.ras:
        report = ras_status(addr)
        assert report.startswith("NCCL version 2.27.7 compiled with CUDA 12.9\n")
        assert ("  Nodes  Processes         GPUs  Processes     GPUs\n"
                "(total)   per node  per process    (total)  (total)\n"
                "      2          8            1         16       16\n") in report
        assert "\nCommunicators... (0.00s)\n=============\n" in report
        assert "    0         1         2         8        16        16   RUNNING      OK\n" in report
        assert report.endswith("\nErrors\n======\n\nWarnings\n========\n\n")


def test_a_tp16_worker_logs_no_batch_lines_while_the_head_serves(sglang_tp16) -> None:
    outcome = complete_in_background(sglang_tp16.ports[0], 45)
    wait_done(outcome)
    assert outcome.get("status") == 200, outcome
    assert sglang_tp16.head.having(" TP0] Decode batch.")  # attn-TP rank 0 is on node 0 only
    assert not sglang_tp16.worker.having("batch.")


def test_pp2_tp8_over_two_hosts_logs_node_1s_heartbeat(tmp_path: Path) -> None:
    cluster = start_sglang(tmp_path, ["--tp-size", "8", "--pp-size", "2"])
    try:
        cluster.head.wait_for("The server is fired up and ready to roll!")
        cluster.worker.wait_for("Starting dummy health check server at")
        assert len(cluster.worker.having(" PP1 TP")) > 0 and not cluster.worker.having(" PP0 TP")
        outcome = complete_in_background(cluster.ports[0], 45)
        cluster.worker.wait_for(" PP1 TP0] Decode batch. #running-req: 1")  # each stage's TP rank 0 logs it
        cluster.head.wait_for(" PP0 TP0] Decode batch. #running-req: 1")
        wait_done(outcome)
        assert outcome.get("status") == 200, outcome
        report = ras_status(cluster.ras[1])
        # The world spans both hosts; each stage's TP group lives on one.
        assert "    0         1         2         8        16        16   RUNNING      OK\n" in report
        assert "    1         2         1         8         8        16   RUNNING      OK\n" in report
    finally:
        cluster.stop()


def test_a_node_that_never_joins_leaves_the_other_waiting_until_the_dist_timeout(tmp_path: Path) -> None:
    # Node 1 cannot reach the rendezvous (--fail rendezvous: a wrong interface); --dist-timeout 100 is 2 s.
    started = time.monotonic()
    cluster = start_sglang(tmp_path, ["--tp-size", "16", "--dist-timeout", "100"],
                           worker_flags=("--fail", "rendezvous"))
    try:
        for node in (cluster.head, cluster.worker):
            node.wait_for("] Init torch distributed begin.", count=8)
        assert cluster.head.wait_exit() == 1
        assert cluster.worker.wait_exit() == 1
        # A hang until the timeout: neither process ended before it, none made progress, and the only
        # errors are the timeout's (a wait on the exits, not a window that a loaded machine outlasts).
        assert time.monotonic() - started >= 100 * SCALE
        for node in (cluster.head, cluster.worker):
            assert not node.having("Init torch distributed ends")
            first_error = next(i for i, line in enumerate(node.lines) if "Error" in line)
            assert "torch.distributed.Dist" in node.lines[first_error], node.lines[first_error]
        store = cluster.head.having("torch.distributed.DistStoreError")
        assert store == ["torch.distributed.DistStoreError: Timed out after 101 seconds waiting for clients. "
                         "8/16 clients joined."]
        assert cluster.head.having(" TP0] Scheduler hit an exception: Traceback (most recent call last):")
        dial = cluster.worker.having("torch.distributed.DistNetworkError")
        assert dial == ["torch.distributed.DistNetworkError: The client socket has timed out after 100000ms "
                        f"while trying to connect to ({HEAD_IP}, {cluster.rendezvous_port})."]
        assert cluster.head.having("Received sigquit from a child process")
    finally:
        cluster.stop()


def test_a_killed_worker_leaves_the_heads_health_200_until_sglangs_watchdog_fires(tmp_path: Path) -> None:
    # --watchdog-timeout 300 is 6 s: /health is read during the stall, far from the watchdog's end.
    cluster = start_sglang(tmp_path, ["--tp-size", "16", "--ep-size", "16"], head_flags=("--watchdog-timeout", "300"))
    try:
        cluster.head.wait_for("The server is fired up and ready to roll!")
        cluster.worker.wait_for("Starting dummy health check server at")
        assert cluster.worker.having(" TP15 EP15] Load weight end.")
        cluster.worker.proc.kill()
        cluster.worker.wait_exit()
        # RAS names the lost host's eight processes at once (their connection is gone), then calls them dead.
        report = wait_ras(cluster.ras[0], "INCOMPLETE\n  Missing communicator data from 8 job processes\n")
        assert f"  Process {cluster.worker.proc.pid + RANK_PID_OFFSET} on node {WORKER_IP} managing GPU 0\n" in report
        assert "    0         1         1         8        16         8   RUNNING  INCOMPLETE\n" in report
        report = wait_ras(cluster.ras[0], "DEAD\n  8 job processes are considered dead (unreachable via the RAS network)")
        assert "  Rank 15 -- GPU 7 managed by process" in report and f"on node {WORKER_IP}\n" in report
        # A request stalls; /health stays 200 until the watchdog (300 s x 0.02) ends the head.
        sent = time.monotonic()
        outcome = complete_in_background(cluster.ports[0], 8)
        cluster.head.wait_for(" TP0 EP0] Prefill batch.")  # the request is in, its batch on the lost node
        assert http_status(f"http://{HEAD_IP}:{cluster.ports[0]}/health") == 200
        assert "done_at" not in outcome
        assert cluster.head.wait_exit(timeout_s=60) == 1
        wait_done(outcome, "the stalled request to end with the head")
        assert outcome["done_at"] - sent >= 300 * SCALE, outcome  # it stalled until the watchdog, not less
        fired = cluster.head.having("Watchdog timeout (self.watchdog_timeout=300.0)")
        assert len(fired) == 8 and fired[0].endswith("TP0 EP0] Watchdog timeout (self.watchdog_timeout=300.0)")
        assert cluster.head.having("Received sigquit from a child process. It usually means the child failed.")
        assert "status" not in outcome
    finally:
        cluster.stop()


def test_a_rank_oom_killed_while_loading_leaves_every_node_waiting(tmp_path: Path) -> None:
    # sglang PR #20287: the kernel takes node 1's last rank; nothing says so, and the launcher waits for ever.
    cluster = start_sglang(tmp_path, ["--tp-size", "16"], SERVE_CONSOLE_SIM_FAIL="oom_kill")
    try:
        cluster.head.wait_for("] Load weight end.", count=8)
        cluster.worker.wait_for("] Load weight end.", count=7)
        report = wait_ras(cluster.ras[0], "1 job process is considered dead")
        assert "  Process" in report and f"on node {WORKER_IP} managing GPU 7\n" in report
        assert "  Rank 15 -- GPU 7 managed by process" in report
        time.sleep(0.5)  # deliberate: an observation window; nothing is due, the nodes wait for ever
        for node in (cluster.head, cluster.worker):
            assert node.proc.poll() is None and not node.having("KV Cache is allocated")
            assert not node.having("Error") and not node.having("Traceback")
        assert not cluster.worker.having(" TP15] Load weight end.")
        used = {gpu.index: gpu.used_mib for gpu in read_snapshot(tmp_path / "ledger-1").gpus}
        assert used[7] == 0 and min(used[i] for i in range(7)) > 30_000  # the killed rank's memory is freed
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def vllm_tp8(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = start_vllm(tmp_path_factory.mktemp("vllm"), ["-tp", "8"])
    try:
        cluster.head.wait_for("Application startup complete.")
        cluster.worker.wait_for("Graph capturing finished", count=4)
        yield cluster
    finally:
        cluster.stop()


def test_vllm_tp8_over_two_hosts_runs_its_head_and_a_headless_node(vllm_tp8) -> None:
    head, worker, port = vllm_tp8.head, vllm_tp8.worker, vllm_tp8.rendezvous_port
    assert head.having(f"DP group leader: node_rank=0, node_rank_within_dp=0, master_addr={HEAD_IP}, "
                       f"mq_connect_ip={HEAD_IP} (local), world_size=8, local_world_size=4")
    assert not worker.having("DP group leader") and not worker.having("APIServer") and not worker.having("EngineCore")
    assert worker.having(f"[serve.py:231] Launching vLLM (v0.32.0) headless multiproc executor, with head node "
                         f"address {HEAD_IP}:{port} for torch.distributed process group.")
    for node, first in ((head, 0), (worker, 4)):
        for local in range(4):
            assert node.having(f"world_size=8 rank={first + local} local_rank={local} "
                               f"distributed_init_method=tcp://{HEAD_IP}:{port} backend=nccl")
    assert head.having("rank 0 in world size 8 is assigned as DP rank 0")
    assert len(worker.having("] Available KV cache memory:")) == 4 and worker.having("(Worker_TP7 pid=")
    assert http_status(f"http://{HEAD_IP}:{vllm_tp8.ports[0]}/health") == 200
    assert http_status(f"http://{WORKER_IP}:{vllm_tp8.ports[1]}/health") is None  # a headless node serves nothing
    outcome = complete_in_background(vllm_tp8.ports[0], 20)  # each step a round trip to node 1
    wait_done(outcome)
    assert outcome.get("status") == 200, outcome


def test_a_stopped_vllm_worker_wedges_the_head_until_the_rpc_times_out(tmp_path: Path) -> None:
    cluster = start_vllm(tmp_path, ["-tp", "8"], VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS="100",
                         NCCL_RAS_TIMEOUT_FACTOR="1")
    try:
        cluster.head.wait_for("Application startup complete.")
        cluster.worker.wait_for("Graph capturing finished", count=4)
        stopped = time.monotonic()
        cluster.worker.proc.send_signal(signal.SIGSTOP)
        outcome = complete_in_background(cluster.ports[0], 8)
        # RAS: unresponsive once the host has been silent ~5 s (x 0.02, but never under 1 s), dead at ~60 s.
        report = wait_ras(cluster.ras[0], "Missing communicator data from 4 job processes")
        assert time.monotonic() - stopped >= 1.0
        assert "DEAD" not in report and "managing GPU 3\n" in report
        report = wait_ras(cluster.ras[0], "4 job processes are considered dead")
        assert "#0-0 (" in report and "INCOMPLETE\n  Missing communicator data from 4 ranks\n" in report
        assert http_status(f"http://{HEAD_IP}:{cluster.ports[0]}/health") == 200
        assert "done_at" not in outcome
        cluster.head.wait_for("TimeoutError: RPC call to sample_tokens timed out.", timeout_s=20)
        assert cluster.head.wait_exit(timeout_s=20) == 0  # vLLM's API server exits 0 after its engine died
        # Read once the head has exited and its output is drained: under load these lines trail the timeout.
        assert cluster.head.having("EngineCore encountered a fatal error.")
        assert cluster.head.having("EngineDeadError")
        with open(f"/proc/{cluster.worker.proc.pid}/stat") as fh:  # the wedged host is alive, and stopped
            assert fh.read().rpartition(")")[2].split()[0] == "T"
    finally:
        cluster.stop()


def test_a_vllm_follower_without_headless_dies_on_its_engine_cores_first_rpc(tmp_path: Path) -> None:
    cluster = start_vllm(tmp_path, ["-tp", "8"], headless=False)
    try:
        assert cluster.worker.wait_exit() == 1
        assert cluster.worker.having("AssertionError: collective_rpc should not be called on follower node")
        assert cluster.worker.having("] EngineCore failed to start.")
        assert cluster.worker.having("RuntimeError: Engine core initialization failed. See root cause above.")
        cluster.head.wait_for("] Available KV cache memory:", count=4)
        time.sleep(0.5)  # deliberate: an observation window; node 0 waits for ever on the follower's KV sizing
        assert cluster.head.proc.poll() is None and not cluster.head.having("GPU KV cache size")
    finally:
        cluster.stop()


@pytest.mark.parametrize(("engine", "flags", "says"), [
    ("sglang", ["--tp-size", "12", "--nnodes", "8", "--node-rank", "0", "--dist-init-addr", "127.0.0.1:1"],
     "AssertionError: tp_size must be divisible by number of nodes"),
    ("sglang", ["--tp-size", "8", "--dp-size", "2", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr",
                "127.0.0.1:1"], "AssertionError: multi-node data parallel is not supported unless dp attention!"),
    ("sglang", ["--tp-size", "16", "--nnodes", "2", "--node-rank", "1"], "--dist-init-addr HOST:PORT"),
    ("vllm", ["-tp", "8", "-dp", "2", "--data-parallel-size-local", "1"], "data parallelism across nodes"),
])
def test_multi_node_flags_that_do_not_fit_are_refused(tmp_path: Path, engine: str, flags: list[str],
                                                      says: str) -> None:
    model = ["serve", str(QWEN)] if engine == "vllm" else ["--model-path", str(KIMI)]
    done = subprocess.run([sys.executable, "-m", f"console.sim.{engine}", *model, *flags, "--ledger-dir",
                           str(tmp_path)], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=60)
    assert done.returncode in (1, 2) and says in done.stdout + done.stderr, done.stdout + done.stderr
