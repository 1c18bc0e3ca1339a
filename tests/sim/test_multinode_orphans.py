"""A node left running without its head (issue 30, E26): the head of TP16 dies and its worker lives on,
holding its GPUs; `status`, of the head and of the node, and the pane name it; a failed start over
several hosts stops the nodes it started, also when there is nothing to roll back to."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest
from waiting import WaitTimeout, await_for

from console.commands.status import _print_human, _print_nodes
from console.ops.status import service_status
from console.ops.switch import READY, StepEvent, switch_layout
from console.ops.views import FitCache, service_view

UNIT = "sglang-k26x2@tp16.service"


async def wait_for(read, ok, timeout_s: float = 30.0):
    """The value `read()` gives once `ok` holds of it, or the last one seen at the deadline."""
    last = []

    async def holds():
        last[:] = [await read()]
        return ok(last[0])

    with contextlib.suppress(WaitTimeout):
        await await_for(holds, "a value that holds", timeout_s=timeout_s)
    return last[0]


async def test_a_worker_whose_head_died_is_named_by_status_and_the_pane(cluster, capsys) -> None:
    head, worker = cluster
    service = head.config.services[0]
    assert (await switch_layout(head, service, "TP16", timeout_s=60)).outcome == READY
    os.kill((await head.services.state(UNIT)).main_pid, signal.SIGKILL)
    status = await wait_for(lambda: service_status(head, service), lambda st: st.active_unit is None)
    assert status.active_unit is None and (await worker.services.state(UNIT)).is_running
    assert [(o.host, o.node_rank, o.unit) for o in status.orphans] == [("demo-b", 1, UNIT)]
    assert status.to_json()["orphans"][0]["host"] == "demo-b"
    assert status.group == "dead" and [n.state for n in status.ranks] == ["dead", "alive"]
    _print_human(status)
    out = capsys.readouterr().out
    assert "orphan: demo-b (node-rank 1) runs sglang-k26x2@tp16.service" in out, out
    assert "while the head demo-a runs none of k26's units: it holds its GPUs" in out, out
    await _print_nodes(worker, worker.config, False)
    out = capsys.readouterr().out
    assert "ORPHAN: the head demo-a runs none of k26's units" in out, out
    view = await service_view(head, service, fits=FitCache())
    assert view.phase is not None and view.phase.value == "failed"
    assert view.orphans and view.orphans[0].startswith("demo-b (node-rank 1) runs sglang-k26x2@tp16.service")


@pytest.mark.parametrize("cluster", [40960], indirect=True)
async def test_a_failed_start_with_nothing_to_roll_back_to_stops_every_node(cluster) -> None:
    """demo-b runs out of memory loading TP16 while the head waits at its next collective; no layout was
    ever ready, so nothing rolls back: the switch still stops what it started on every node."""
    head, worker = cluster
    service = head.config.services[0]
    events: list = []
    result = await switch_layout(head, service, "TP16", timeout_s=60, on_event=events.append)
    assert result.outcome == "failed" and result.rollback is None, result.reason
    for node in (head, worker):
        assert not (await node.services.state(UNIT)).is_running, node.name
    stops = [e.detail for e in events if isinstance(e, StepEvent) and e.step == "stop"]
    assert any(d.startswith(f"stopping {UNIT} on demo-a: the start failed") for d in stops), stops
