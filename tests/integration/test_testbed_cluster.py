"""The test hosts' cluster network, and one simulated SGLang over two of them (issue 20).

tb1 and tb2 reach each other on 10.232.0.I (cl0, a bridge in netns tbnet); this machine does not. Then
`sglang-ds3@tp16.service` runs DeepSeek-V3 as TP16 over both, through systemd, raw ssh only: node 0 on
tb1 serves the API, node 1 on tb2 its dummy /health, the rendezvous on 10.232.0.1:5000. Killing tb2's
unit leaves the field's worst case: tb1's /health answers 200 while half the world is dead, and only
NCCL RAS (docs/ras.md) tells it, first INCOMPLETE, then DEAD (60 s of story time: 3 s at scale 0.05).
Its vLLM twin, `vllm-ds3@tp16.service` (`--headless` on node 1), the same, more briefly.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

pytestmark = pytest.mark.integration

UNIT = "sglang-ds3@tp16.service"
NODE_FILE = "/etc/serve-console/ds3.node.env"
VLLM_UNIT = "vllm-ds3@tp16.service"
VLLM_NODE_FILE = "/etc/serve-console/ds3-vllm.node.env"
DIST_PORT, HTTP_PORT, VLLM_PORT, RAS_PORT = 5000, 30000, 8000, 28028
READY_LINE = "The server is fired up and ready to roll!"
WORKER_LINES = ("Init torch distributed ends.", f"Starting dummy health check server at 0.0.0.0:{HTTP_PORT}")
# The RAS client protocol as `ncclras` speaks it: the report follows STATUS, then the server closes.
RAS_CLIENT = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(b"CLIENT PROTOCOL 2\\nSTATUS\\n")
out = b""
while chunk := s.recv(65536):
    out += chunk
sys.stdout.write(out.decode())
"""
# One listener on the host's cluster address only, which answers each connection with the host's name.
LISTENER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(socket.gethostname().encode() + b"\\n")
    c.close()
"""
PROCESS = re.compile(r"^\s+Process (\d+) on node (\S+) managing GPU (\S+)$")


def _two_hosts(bed) -> tuple:
    if len(bed.hosts) < 2 or not all(h.cluster_address for h in bed.hosts[:2]):
        pytest.skip("needs two test hosts with a cluster network (SERVE_CONSOLE_TESTBED_HOSTS >= 2)")
    return bed.hosts[0], bed.hosts[1]


def _wait_remote(bed, name: str, shell_test: str, timeout_s: float, what: str) -> float:
    """Poll `shell_test` on the host (one ssh session) until it succeeds; the seconds it took."""
    start = time.monotonic()
    loop = (
        f"end=$(( $(date +%s) + {int(timeout_s) + 1} )); until {shell_test}; do "
        f'[ "$(date +%s)" -ge "$end" ] && exit 1; sleep 0.1; done'
    )
    if bed.ssh(name, loop, check=False, timeout_s=timeout_s + 15).returncode != 0:
        pytest.fail(f"{name}: {what} not seen within {timeout_s} s")
    return time.monotonic() - start


def _ras_status(bed, via: str, address: str) -> str:
    """NCCL RAS's STATUS report, asked from host `via` at address:28028."""
    return bed.ssh(via, f"python3 - {address} {RAS_PORT}", input=RAS_CLIENT, timeout_s=20).stdout


def _ras_errors(report: str) -> dict[str, list[tuple[str, str]]]:
    """The Errors section's INCOMPLETE and DEAD lists of processes: (node address, GPU) each."""
    errors = report.split("\nErrors\n======\n", 1)[-1].split("\nWarnings\n", 1)[0]
    found: dict[str, list[tuple[str, str]]] = {}
    heading = None
    for line in errors.splitlines():
        if line in ("INCOMPLETE", "DEAD"):
            heading = line
        elif not line.strip() or not line.startswith(" "):
            heading = None
        elif heading and (match := PROCESS.match(line)):
            found.setdefault(heading, []).append((match.group(2), match.group(3)))
    return found


def _journal(bed, name: str, unit: str = UNIT, *, since: float) -> str:
    """The unit's journal from `since` (epoch seconds): the test hosts are shared by the session, and an
    earlier test may have run the same unit."""
    return bed.ssh(name, f"journalctl -u {unit} -o cat --no-pager --since @{since:.0f}").stdout


def _health(port: int, address: str = "127.0.0.1") -> str:
    return f"curl -s -o /dev/null -w '%{{http_code}}' http://{address}:{port}/health"


def _gpus_of(address: str) -> list[tuple[str, str]]:
    return [(address, str(gpu)) for gpu in range(8)]


@pytest.fixture
def two_nodes(clean_testbed):
    """`start(unit, node_file, args_of_rank)`: writes tb1's (node-rank 0) and tb2's (node-rank 1) node
    files as the console does and starts the unit on tb2, then tb1; every unit started is stopped and
    its node file removed at the end."""
    bed = clean_testbed
    head, worker = _two_hosts(bed)
    started: list[tuple[str, str]] = []

    def start(unit: str, node_file: str, args_of_rank) -> None:
        for rank, host in enumerate((head, worker)):
            bed.write_file(
                host.name,
                node_file,
                f'SERVE_CONSOLE_NODE_ARGS="{args_of_rank(rank)}"\n'
                "NCCL_SOCKET_IFNAME=cl0\nGLOO_SOCKET_IFNAME=cl0\n",
            )
            bed.ssh(host.name, f"systemctl reset-failed {unit} 2>/dev/null; true")
        started.append((unit, node_file))
        # The worker first, as the console starts a service's nodes (the head would wait for it anyway).
        for host in (worker, head):
            bed.ssh(host.name, f"systemctl start {unit}")

    try:
        yield bed, head, worker, start
    finally:
        for unit, node_file in started:
            for host in (head, worker):
                bed.ssh(
                    host.name,
                    f"systemctl stop {unit}; systemctl reset-failed {unit} 2>/dev/null; rm -f {node_file}",
                    check=False,
                    timeout_s=60,
                )


def test_cluster_network_joins_the_hosts_and_nothing_else(clean_testbed):
    bed = clean_testbed
    one, two = _two_hosts(bed)
    assert (one.cluster_address, two.cluster_address) == ("10.232.0.1", "10.232.0.2")
    bed.ssh(
        two.name,
        [
            "systemd-run",
            "--unit=tb-cluster-listen",
            "--collect",
            "python3",
            "-c",
            LISTENER,
            two.cluster_address,
            "18080",
        ],
    )
    try:
        # tb1 reaches tb2's cluster address (only cl0 leads there: the hosts have no default route).
        dial = (
            "python3 -c 'import socket,sys; c=socket.create_connection((sys.argv[1], 18080), timeout=2); "
            f"print(c.recv(64).decode().strip())' {two.cluster_address}"
        )
        _wait_remote(bed, one.name, f"{dial} | grep -qx {two.name}", 10, f"{two.name}'s cluster listener")
        route = bed.ssh(one.name, f"ip -o route get {two.cluster_address}").stdout
        assert " dev cl0 " in route, route
    finally:
        bed.ssh(two.name, "systemctl stop tb-cluster-listen.service", check=False)
    # This machine's own namespace has no route into 10.232.0.0/24 (its default route leads off the
    # machine, never into a namespace of ours), and forwards nothing.
    own = subprocess.run(["ip", "-o", "route", "show"], capture_output=True, text=True, check=True).stdout
    assert "10.232." not in own, own
    via = subprocess.run(
        ["ip", "-o", "route", "get", two.cluster_address], capture_output=True, text=True
    ).stdout
    assert not re.search(r" dev (cl|tb)", via), via
    bridge = subprocess.run(
        ["ip", "-n", "tbnet", "-o", "link", "show", "master", "br0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"cl-{one.name}" in bridge and f"cl-{two.name}" in bridge, bridge


def test_sglang_over_two_hosts_head_stays_healthy_while_ras_sees_the_dead_worker(two_nodes):
    bed, head, worker, start_nodes = two_nodes
    start, since = time.monotonic(), time.time() - 1
    start_nodes(
        UNIT,
        NODE_FILE,
        lambda rank: f"--nnodes 2 --node-rank {rank} --dist-init-addr {head.cluster_address}:{DIST_PORT}",
    )
    health = _health(HTTP_PORT)
    ready_s = _wait_remote(bed, head.name, f'[ "$({health})" = 200 ]', 40, "/health 200")
    _wait_remote(
        bed, head.name, f"journalctl -u {UNIT} -o cat --since @{since:.0f} | grep -qF '{READY_LINE}'", 10, "the ready line"
    )
    print(f"\nTP16 over {head.name}+{worker.name}: /health 200 in {ready_s:.1f} s")

    worker_log = _journal(bed, worker.name, since=since)
    for line in WORKER_LINES:
        assert line in worker_log, f"{worker.name} never logged {line!r}:\n{worker_log[-2000:]}"
    assert READY_LINE not in worker_log  # only node 0 serves the API
    assert len(re.findall(r"TP(?:[89]|1[0-5])\] Init torch distributed ends\.", worker_log)) == 8
    # The worker's dummy health server and its RAS answer over the cluster network, from the head.
    assert bed.ssh(head.name, _health(HTTP_PORT, worker.cluster_address)).stdout == "200"
    healthy = _ras_status(bed, head.name, worker.cluster_address)
    assert re.search(r"^\s+2\s+8\s+1\s+16\s+16$", healthy, re.M), healthy  # 2 nodes x 8 processes
    assert re.search(r"\s2\s+8\s+16\s+16\s+RUNNING\s+OK$", healthy, re.M), healthy
    assert _ras_errors(healthy) == {}, healthy

    bed.ssh(worker.name, f"systemctl kill -s KILL {UNIT}")
    killed = time.monotonic()
    _wait_remote(
        bed,
        worker.name,
        f'[ "$(systemctl show -p ActiveState --value {UNIT})" = failed ]',
        10,
        "the killed unit failed",
    )
    # RAS on the head (localhost:28028, NCCL's default, and its cluster address): tb2's processes are
    # missing at once, and dead 60 story seconds after their last keep-alive.
    first = _ras_errors(_ras_status(bed, head.name, "127.0.0.1"))
    missing = first.get("INCOMPLETE", []) + first.get("DEAD", [])
    assert sorted(missing) == _gpus_of(worker.cluster_address), first

    # The head's /health keeps answering 200 (nothing there looks at the dead worker), for 5 s.
    probe = f"for i in $(seq 1 25); do {health}; echo; sleep 0.2; done"
    codes = bed.ssh(head.name, probe).stdout.split()
    assert codes == ["200"] * 25, codes
    assert bed.ssh(head.name, f"systemctl is-active {UNIT}").stdout.strip() == "active"

    later = _ras_status(bed, head.name, head.cluster_address)
    dead = _ras_errors(later).get("DEAD", [])
    assert sorted(dead) == _gpus_of(worker.cluster_address), later
    assert re.search(r"RUNNING\s+INCOMPLETE$", later, re.M), later
    print(
        f"{worker.name} killed: head /health 200 for {time.monotonic() - killed:.1f} s after; RAS: "
        f"{'INCOMPLETE' if 'INCOMPLETE' in first else 'DEAD'} at once, DEAD later; "
        f"whole test {time.monotonic() - start:.1f} s"
    )


def test_vllm_over_two_hosts_headless_worker_dies_behind_a_healthy_head(two_nodes):
    bed, head, worker, start_nodes = two_nodes
    start, since = time.monotonic(), time.time() - 1
    master = f"--master-addr {head.cluster_address} --master-port {DIST_PORT}"
    start_nodes(
        VLLM_UNIT,
        VLLM_NODE_FILE,
        lambda rank: f"--nnodes 2 --node-rank {rank} {master}" + (" --headless" if rank else ""),
    )
    health = _health(VLLM_PORT)
    ready_s = _wait_remote(bed, head.name, f'[ "$({health})" = 200 ]', 40, "vLLM's /health 200")
    launched = (
        f"Launching vLLM (v0.32.0) headless multiproc executor, with head node address "
        f"{head.cluster_address}:{DIST_PORT} for torch.distributed process group."
    )
    assert launched in _journal(bed, worker.name, VLLM_UNIT, since=since)
    healthy = _ras_status(bed, head.name, worker.cluster_address)
    assert re.search(r"\s2\s+8\s+16\s+16\s+RUNNING\s+OK$", healthy, re.M), healthy

    bed.ssh(worker.name, f"systemctl kill -s KILL {VLLM_UNIT}")
    codes = bed.ssh(head.name, f"for i in $(seq 1 20); do {health}; echo; sleep 0.2; done").stdout.split()
    assert codes == ["200"] * 20, codes
    report = _ras_status(bed, head.name, "127.0.0.1")
    errors = _ras_errors(report)
    missing = errors.get("INCOMPLETE", []) + errors.get("DEAD", [])
    assert sorted(missing) == _gpus_of(worker.cluster_address), report
    print(
        f"\nvLLM TP16 over {head.name}+{worker.name}: /health 200 in {ready_s:.1f} s; after the kill 200 for "
        f"4 s, RAS {sorted(errors)}; whole test {time.monotonic() - start:.1f} s"
    )
