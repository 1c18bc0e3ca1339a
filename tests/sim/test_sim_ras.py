"""The NCCL RAS emulation on its own: the client protocol, the STATUS report's sections and its outlier
rule, and when a peer is missing or dead (docs/ras.md). No engine process: the report is fed processes.
"""

from __future__ import annotations

import asyncio

from sim_fixtures import free_port

from console.sim.cluster import (
    DEAD,
    OK,
    UNRESPONSIVE,
    Liveness,
    RasComm,
    RasProcess,
    RasServer,
    status_report,
)
from console.sim.cluster.liveness import PeerState


def _job(states: dict[int, str], per_node: int = 8, nodes: int = 2) -> list[RasProcess]:
    return [RasProcess(rank, 1000 + rank, f"10.0.0.{rank // per_node + 1}", rank % per_node, rank % per_node,
                       states.get(rank, OK)) for rank in range(per_node * nodes)]


WORLD16 = [RasComm(0xABCDEF0123456789, tuple(range(16)))]


def test_a_healthy_job_reads_as_ncclras_prints_it() -> None:
    report = "".join(status_report(_job({}), WORLD16))
    assert report == (
        "NCCL version 2.27.7 compiled with CUDA 12.9\nCUDA runtime version 12090, driver version 12090\n\n"
        "Job summary\n===========\n\n"
        "  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n"
        "      2          8            1         16       16\n"
        "\nCommunicators... (0.00s)\n=============\n\n"
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "    0         1         2         8        16        16   RUNNING      OK\n"
        "\nErrors\n======\n\nWarnings\n========\n\n")


def test_missing_and_dead_processes_are_listed_only_as_outliers() -> None:
    one = "".join(status_report(_job({9: UNRESPONSIVE}), WORLD16))
    assert ("INCOMPLETE\n  Missing communicator data from 1 job process\n"
            "  Process 1009 on node 10.0.0.2 managing GPU 1\n\n") in one
    assert ("#0-0 (abcdef0123456789) INCOMPLETE\n  Missing communicator data from 1 rank\n"
            "  Rank 9 -- GPU 1 managed by process 1009 on node 10.0.0.2\n") in one
    assert "    0         1         2       7-8        16        15   RUNNING  INCOMPLETE\n" in one
    # Sixteen missing of 32: more than ten, so counts only, unless VERBOSE STATUS asks for every line.
    states = {rank: DEAD for rank in range(16, 32)}
    terse = "".join(status_report(_job(states, nodes=4), [RasComm(1, tuple(range(32)))]))
    assert "DEAD\n  16 job processes are considered dead (unreachable via the RAS network)\n\n" in terse
    assert "Missing communicator data from 16 ranks\n\n" in terse and "Process 1016" not in terse
    assert "INCOMPLETE\n  Missing communicator data from" not in terse.split("#0-0")[0]  # dead are not missing
    verbose = "".join(status_report(_job(states, nodes=4), [RasComm(1, tuple(range(32)))], verbose=True))
    assert "  Process 1016 on node 10.0.0.3 managing GPU 0\n" in verbose
    assert "  Rank 31 -- GPU 7 managed by process 1031 on node 10.0.0.4\n" in verbose


def test_a_gpu_cuda_numbers_differently_shows_both_indices() -> None:
    procs = [RasProcess(0, 7, "10.0.0.1", 0, 4, OK), RasProcess(1, 8, "10.0.0.2", 1, 5, UNRESPONSIVE)]
    report = "".join(status_report(procs, [RasComm(2, (0, 1))]))
    assert "  Process 8 on node 10.0.0.2 managing GPU 1 (NVML 5)\n" in report
    assert "  Rank 1 -- GPU 1 (NVML 5) managed by process 8 on node 10.0.0.2\n" in report


def test_nodes_with_different_process_counts_get_the_split_summary() -> None:
    procs = [RasProcess(r, r, "10.0.0.1" if r < 8 else "10.0.0.2", r % 8, r % 8, OK) for r in range(10)]
    report = "".join(status_report(procs, [RasComm(3, tuple(range(10)))]))
    assert ("  Nodes  Processes         GPUs\n          per node  per process\n"
            "      1          8            1\n      1          2            1\n\n"
            "  Nodes  Processes         GPUs\n(total)    (total)      (total)\n"
            "      2         10           10\n") in report


async def test_the_client_protocol() -> None:
    port = free_port()
    server = RasServer(lambda: _job({}), WORLD16)
    assert await server.start({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for command, answer in ((b"CLIENT PROTOCOL 3\n", b"SERVER PROTOCOL 2\n"), (b"timeout 5\n", b"OK\n"),
                                (b"TIMEOUT soon\n", b"ERROR: Invalid timeout value soon\n"),
                                (b"SET FORMAT json\r\n", b"ERROR: Unknown command SET FORMAT json\n")):
            writer.write(command)
            assert await reader.readline() == answer
        writer.write(b"status\n")
        report = await asyncio.wait_for(reader.read(), 5)  # read to EOF: the server closes after a report
        assert report.decode().startswith("NCCL version 2.27.7") and report.endswith(b"========\n\n")
        writer.close()
    finally:
        await server.stop()
    assert not await RasServer(lambda: [], []).start({"NCCL_RAS_ENABLE": "0"})


def test_timeouts_follow_the_factor_and_the_time_scale_with_a_floor() -> None:
    real = Liveness.for_run(1.0, {})
    assert (real.keepalive_s, real.unresponsive_s, real.dead_s) == (1.0, 5.0, 60.0)
    doubled = Liveness.for_run(1.0, {"NCCL_RAS_TIMEOUT_FACTOR": "2"})
    assert (doubled.unresponsive_s, doubled.dead_s) == (10.0, 120.0)
    fast = Liveness.for_run(0.02, {"NCCL_RAS_TIMEOUT_FACTOR": "0.5"})  # NCCL reads a whole number only
    assert fast.unresponsive_s == 1.0 and fast.dead_s == 1.4 and fast.keepalive_s == 0.2


def test_a_peer_turns_unresponsive_then_dead_and_stays_dead() -> None:
    liveness = Liveness(keepalive_s=1.0, unresponsive_s=5.0, dead_s=60.0)
    peer = PeerState(last_contact=100.0)
    assert [peer.state(liveness, t) for t in (104.0, 105.0, 160.0)] == [OK, UNRESPONSIVE, DEAD]
    peer.closed = True
    assert peer.state(liveness, 100.5) == UNRESPONSIVE
    peer = PeerState(last_contact=100.0, dead_ranks={3: 100.0})
    assert peer.rank_state(3, liveness, 101.0) == UNRESPONSIVE and peer.rank_state(2, liveness, 101.0) == OK
    assert peer.rank_state(3, liveness, 160.0) == DEAD
    peer = PeerState(last_contact=100.0)
    peer.heard(liveness, 161.0)  # back after the dead timeout (SIGCONT): RAS does not take it back
    assert peer.state(liveness, 161.5) == DEAD
