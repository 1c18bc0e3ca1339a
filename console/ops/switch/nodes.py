"""Starting a layout of a service that spans several hosts: every node stopped, each told its place, the
head started first, every node watched.

The order follows both engines' rules: nothing of the old layout may still hold a rendezvous port or GPU
memory when the new one starts, so every node's units stop first (the workers before the head); each
node used gets its own rank, the head's address and port, and the cluster's interface (layout_files.py);
the head starts first (vLLM's headless workers dial its master port; SGLang's nodes rendezvous in any
order, head first as its docs do), then the others in node order.
"""

from __future__ import annotations

import time

from console.config import DROP_IN, LayoutConfig
from console.domain.values import Finding, FindingClass, Phase
from console.errors import ConsoleError
from console.hosts.base import Host
from console.ops.cluster import node_hosts, places
from console.ops.status import unit_states
from console.ops.switch.events import FAILED
from console.ops.switch.group_follow import GroupFollower
from console.ops.switch.layout_files import file_to_read, layout_file
from console.ops.switch.start_follow import Verdict
from console.ops.switch.starter_protocol import Starter


async def start_over_nodes(
    starter: Starter, layout: LayoutConfig, unit: str, t0: float, rollback: bool
) -> Verdict:
    """Stop every node, write each used node's file, start them head first, and watch them all."""
    service = starter.service
    action = "reach every node"
    try:
        hosts = node_hosts(starter.host, service)
        used = hosts[: layout.nodes]
        to_read = file_to_read(service)
        action = "read the nodes' files"
        written = [
            layout_file(service, layout, await node.services.read_file(to_read) if to_read else None, place)
            for node, place in zip(used, places(service, layout, hosts[0].config), strict=True)
        ]
        for node in reversed(hosts):  # every node, workers first: the old layout may span more of them
            for state in await unit_states(node, service):
                if state.is_running:
                    action = f"stop {state.unit} on {node.name}"
                    starter.step(layout.name, t0, "stop", f"stopping {state.unit} on {node.name}",
                                 unit=state.unit, rollback=rollback)  # fmt: skip
                    await node.services.stop(state.unit)
        action = "start"
        holder = await _rendezvous_holder(hosts[0], service.cluster.dist_port)
        if holder is not None:  # nothing of the service runs now: another program has the head's port
            raise ConsoleError(f"the rendezvous port {service.cluster.dist_port} on {hosts[0].name} is held by "
                               f"{holder}; free it, or set dist_port")  # fmt: skip
        cursors: list[str | None] = []
        for rank, (node, file) in enumerate(zip(used, written, strict=True)):
            if file is not None:
                action = f"write {file[0]} on {node.name}"
                starter.step(layout.name, t0, "write", f"writing {file[0]} on {node.name} (node-rank {rank})",
                             unit=unit, rollback=rollback)  # fmt: skip
                await node.services.write_file(*file)
                if service.mapping == DROP_IN:
                    await node.services.daemon_reload()
            cursor = None
            async for entry in node.services.journal(unit, follow=False, lines=1):
                cursor = entry.cursor
            cursors.append(cursor)
            action = f"start {unit} on {node.name}"
            starter.step(layout.name, t0, "start", f"starting {unit} on {node.name} (node-rank {rank} of "
                         f"{layout.nodes})", unit=unit, rollback=rollback)  # fmt: skip
            await node.services.start(unit)
    except ConsoleError as exc:  # a node refused an action: a failed switch, said in one line
        now = time.time()
        reason = f"could not {action}: {exc}"
        return Verdict(FAILED, reason, Finding(cls=FindingClass.UNIT_FAILED, line=str(exc), summary=reason, ts=now),
                       now, now, Phase.FAILED)  # fmt: skip
    starter.step(layout.name, t0, "watch", f"watching {layout.nodes} nodes: journals, unit states, the head's "
                 "health", unit=unit, rollback=rollback)  # fmt: skip
    watch = GroupFollower(starter, used, unit, layout=layout.name, started_mono=t0, rollback=rollback)
    return await watch.run(cursors, timeout_s=starter.timeout_s)


async def _rendezvous_holder(head: Host, port: int) -> str | None:
    """Who listens on the head's rendezvous port, once every unit of the service has stopped."""
    if head.port_holder is None:
        return None
    try:
        return await head.port_holder(port)
    except Exception:  # the host cannot say: the engine's own error will, if the port is taken
        return None
