"""The per-node verdict trusts only the head's own NCCL RAS (issue 30, E27): any local user can bind the
RAS port between two starts (NCCL then runs without RAS, saying so at INFO only) and answer that a
healthy node is dead. What listens there must belong to the head unit's process tree; else `status` says
who holds the port and judges the nodes without RAS."""

from __future__ import annotations

import asyncio
import os

from console.ops.status import service_status
from console.ops.switch import READY, switch_layout

UNIT = "sglang-k26x2@tp16.service"
#: What an impostor answers: node 127.0.0.2's eight processes dead (NCCL RAS's own words, docs/ras.md).
DEAD_REPORT = (
    "NCCL version 2.27.7 compiled with CUDA 12.9\n\nJob summary\n===========\n\n"
    "  Nodes  Processes         GPUs  Processes     GPUs\n(total)   per node  per process    (total)  (total)\n"
    "      2          8            1         16       16\n\nErrors\n======\n\nDEAD\n"
    "  8 job processes are considered dead (unreachable via the RAS network)\n"
    + "".join(f"  Process {40000 + g} on node 127.0.0.2 managing GPU {g}\n" for g in range(8))
    + "\nWarnings\n========\n\n"
)


async def _impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await reader.readline()
        writer.write(b"SERVER PROTOCOL 2\n")
        await reader.readline()
        writer.write(DEAD_REPORT.encode())
        await writer.drain()
    finally:
        writer.close()


async def test_a_program_on_the_ras_port_is_named_and_not_believed(cluster) -> None:
    head, _ = cluster
    service = head.config.services[0]
    port = service.cluster.ras_port
    server = await asyncio.start_server(_impostor, "127.0.0.1", port)  # bound before the engine starts
    try:
        assert (await switch_layout(head, service, "TP16", timeout_s=60)).outcome == READY
        status = await service_status(head, service)
        assert status.group == "alive", [n.words() for n in status.ranks]
        worker = status.ranks[1]
        assert worker.state == "alive"
        assert f"NCCL RAS port {port} on demo-a is held by pid {os.getpid()}" in worker.detail, worker.detail
        assert "judged without RAS" in worker.detail
    finally:
        server.close()
        await server.wait_closed()


async def test_the_head_units_own_ras_is_believed(cluster) -> None:
    from console.ops.ranks import ras_holder

    head, _ = cluster
    service = head.config.services[0]
    assert (await switch_layout(head, service, "TP16", timeout_s=60)).outcome == READY
    main_pid = (await head.services.state(UNIT)).main_pid
    assert await head.node.listener("127.0.0.1", service.cluster.ras_port) is not None  # the engine's RAS
    assert await ras_holder(head, service.cluster.ras_port, UNIT, main_pid) is None
    status = await service_status(head, service)
    assert status.group == "alive" and not any("RAS" in n.detail for n in status.ranks), status.ranks


def test_ss_names_the_listener_for_the_address_asked_and_its_owner() -> None:
    from console.hosts.listeners import ss_listener_of

    out = ("LISTEN 0 4096 127.0.0.2:28028 0.0.0.0:* users:((\"python3\",pid=77,fd=5)) uid:1001 ino:9 sk:1 <->\n"
           "LISTEN 0 4096 127.0.0.1:28028 0.0.0.0:* uid:1002 ino:10 sk:2 <->\n")
    mine = ss_listener_of(out, "127.0.0.1")
    assert (mine.pid, mine.uid) == (None, 1002)  # another user's: ss names no process, only the uid
    assert ss_listener_of(out, "127.0.0.2").pid == 77
    root = ss_listener_of("LISTEN 0 128 *:28028 *:* users:((\"ncclras\",pid=9,fd=3)) ino:5 sk:3 <->\n", "127.0.0.1")
    assert (root.pid, root.command, root.uid) == (9, "ncclras", 0)
    assert ss_listener_of("", "127.0.0.1") is None
