"""A service over two simulated hosts (issue 20), driven as the console drives it: a switch starts every
node in order and watches each; status judges each node on its own while the head answers 200; a
wedged worker is unresponsive, a killed one dead with its own journal's cause; a rendezvous that waits
is named; stop and restart act on every node."""

from __future__ import annotations

import os
import signal

import pytest
from waiting import await_for

from console.ops.status import service_status
from console.ops.switch import READY, StepEvent, restart_service, stop_service, switch_layout
from console.ops.watch import rank_liveness

TIMEOUT = "timeout"


async def group_within(head, service, state: str, timeout_s: float = 30.0, *, explained: bool = False):
    """The service's status once its group is `state` (how soon is bench/dead_rank.py's figure); with
    `explained`, once every node in that state has its cause from its journal too (which may trail it)."""
    async def reached():
        status = await service_status(head, service)
        if status.group != state:
            return None
        if explained and any(n.state == state and n.cause is None for n in status.ranks):
            return None
        return status

    return await await_for(reached, f"the group to be {state}", timeout_s=timeout_s, interval_s=0.1)


async def test_tp16_starts_on_both_nodes_and_each_is_judged_on_its_own(cluster) -> None:
    head, worker = cluster
    service = head.config.services[0]
    events: list = []
    result = await switch_layout(head, service, "TP16", timeout_s=60, on_event=events.append)
    assert result.outcome == READY, result.reason
    starts = [e.detail for e in events if isinstance(e, StepEvent) and e.step == "start"]
    assert starts == ["starting sglang-k26x2@tp16.service on demo-a (node-rank 0 of 2)",
                      "starting sglang-k26x2@tp16.service on demo-b (node-rank 1 of 2)"]  # head first
    assert {e.node for e in events if e.kind == "phase"} == {"demo-a", "demo-b"}
    status = await service_status(head, service)
    doc = status.to_json()
    assert doc["health"]["status"] == "ready" and doc["group"] == "alive"
    assert [(n["host"], n["ranks"], n["state"]) for n in doc["ranks"]] == [
        ("demo-a", [0, 7], "alive"), ("demo-b", [8, 15], "alive")]
    node_file = await worker.services.read_file("/etc/serve-console/k26.node.env")
    dist = service.cluster.dist_port
    assert f"--nnodes 2 --node-rank 1 --dist-init-addr 127.0.0.1:{dist}" in node_file


async def test_a_wedged_worker_then_a_dead_one_fail_the_group_while_the_head_answers_200(cluster) -> None:
    head, worker = cluster
    service = head.config.services[0]
    assert (await switch_layout(head, service, "TP16", timeout_s=60)).outcome == READY
    pid = (await worker.services.state("sglang-k26x2@tp16.service")).main_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        wedged = await group_within(head, service, "unresponsive")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert wedged.group == "unresponsive" and wedged.health.status == "ready"
    assert "stopped (state T)" in wedged.ranks[1].detail
    os.kill(pid, signal.SIGKILL)
    dead = await group_within(head, service, "dead", explained=True)
    assert dead.group == "dead" and dead.health.status == "ready"  # the head still answers 200
    node = dead.ranks[1]
    assert node.host == "demo-b" and node.state == "dead" and node.cause is not None
    assert "killed by signal 9/KILL" in node.cause.summary  # triaged from demo-b's own journal
    watched = await rank_liveness(head, service)  # what the watch daemon's ServeRankDead rule reads
    assert [(r.host, r.alive) for r in watched] == [("demo-a", True), ("demo-b", False)]
    assert watched[1].rank == "node-rank 1 (ranks 8-15)" and "failed" in watched[1].detail
    again = await switch_layout(head, service, "TP16", timeout_s=60, restart_ready=False)
    assert again.outcome == READY  # not 'unchanged': a dead node is no running layout
    assert (await service_status(head, service)).group == "alive"


async def test_a_rendezvous_that_waits_is_named_with_its_address(cluster, monkeypatch) -> None:
    from console.ops.switch import group_follow

    monkeypatch.setattr(group_follow, "RENDEZVOUS_NOTE_S", 0.5)
    head, worker = cluster
    service = head.config.services[0]
    # the worker's node file keeps lines the console does not own: this one makes it never dial the head
    await worker.services.write_file("/etc/serve-console/k26.node.env", "SERVE_CONSOLE_SIM_FAIL=rendezvous\n")
    events: list = []
    result = await switch_layout(head, service, "TP16", timeout_s=3, rollback=False, on_event=events.append)
    assert result.outcome == TIMEOUT
    notes = [e.detail for e in events if isinstance(e, StepEvent) and e.step == "rendezvous"]
    # On a loaded machine a node may first be named as slow to reach its own init line; the rendezvous
    # note follows.
    waits = f"every node waits at the rendezvous (127.0.0.1:{service.cluster.dist_port})"
    assert any(waits in note for note in notes), notes


async def test_stop_and_restart_act_on_every_node(cluster) -> None:
    head, worker = cluster
    service = head.config.services[0]
    assert (await switch_layout(head, service, "PP2 TP8", timeout_s=60)).outcome == READY
    restarted = await restart_service(head, service, timeout_s=60)
    assert restarted.outcome == READY and restarted.layout == "PP2 TP8"
    stopped = await stop_service(head, service)
    assert stopped.outcome == "stopped" and "on demo-b, demo-a" in stopped.reason
    for node in (head, worker):
        assert not (await node.services.state("sglang-k26x2@pp2tp8.service")).is_running


def test_the_program_and_model_of_a_units_execstart() -> None:
    from console.ops.switch.node_preflight import exec_program

    show = ("ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --model-path "
            "/models/DeepSeek-V3 --tp-size 16 --nnodes 2 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; "
            "pid=0 ; code=(null) ; status=0/0 }\n")  # systemd 252's shape
    assert exec_program(show) == ("/usr/bin/python3 -m sglang.launch_server", "/models/DeepSeek-V3")
    vllm = "ExecStart={ path=/opt/vllm/bin/vllm ; argv[]=/opt/vllm/bin/vllm serve /models/ds3 -tp 8 ; ignore_errors=no }"
    assert exec_program(vllm) == ("/opt/vllm/bin/vllm", "/models/ds3")
    assert exec_program("ExecStart=\n") is None


@pytest.mark.parametrize("cluster", [40960], indirect=True)
async def test_a_workers_own_oom_is_the_cause_named_with_its_node(cluster) -> None:
    """demo-b's GPUs are 40 GiB, not 96: its ranks run out of memory loading TP16 while the head waits at
    its next collective; the switch names the worker's OOM, on demo-b, from demo-b's journal."""
    head, _ = cluster
    service = head.config.services[0]
    result = await switch_layout(head, service, "TP16", timeout_s=60, rollback=False)
    assert result.outcome == "failed", result.reason
    assert result.failure.cls.value == "cuda_oom", result.reason
    assert result.failure.summary.startswith("on demo-b (node-rank 1): ")
