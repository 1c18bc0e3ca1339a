"""`serve-console demo --nodes`: the two-host story, headless, on the demo cluster's demo-a and demo-b.

DeepSeek-V3 TP16 comes up over both hosts (each node's start watched from its own journal); then the
engine of the worker on demo-b is killed, as a worker dies in the field (an OOM kill, a crashed rank, a
lost host). The head on demo-a still answers /health with 200 and its engine's own watchdog would wait
300 s; the console's per-node health names the dead node and its cause at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from console.commands.host_args import print_json

HEAD, SERVICE, LAYOUT = "demo-a", "deepseek-v3", "TP16"
#: How long the story waits for the console to name the dead node before it calls the story failed.
VERDICT_WAIT_S = 30.0


async def nodes_story(config, state_root: Path, as_json: bool) -> int:
    from console.commands.demo_stage import stage
    from console.sim.host import time_scale

    async with stage(config, state_root, as_json, head=HEAD, service=SERVICE) as on:
        head, say = on.hosts[HEAD], on.say
        service = head.config.service(SERVICE)
        say(f"serve-console demo --nodes: {service.name} over {', '.join(service.cluster.nodes)}, "
            f"time scale {time_scale(head.config):g}")  # fmt: skip
        say("")
        say(f"1. Switch to {LAYOUT} over both hosts (--tp-size 16 --nnodes 2, each node its node-rank):")
        if not await on.first_switch(head, service, LAYOUT):
            return 1
        worker = on.hosts[service.cluster.nodes[1]]
        unit = service.unit_for(service.layout(LAYOUT))
        pid = (await worker.services.state(unit)).main_pid
        say(f"2. Kill the worker's engine on {worker.name} (kill -9 {pid}), as a rank dies in the field:")
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        status = await _until_dead(head, service, killed, say, as_json)
        if status is None:
            say(f"  the console did not name the dead node in {VERDICT_WAIT_S:.0f} s")
            return 1
        return 0


async def _until_dead(head, service, killed: float, say, as_json: bool):
    """Poll status as the TUI does, until the group is dead; print each node and the head's health."""
    from console.ops.ranks import DEAD
    from console.ops.status import service_status

    while time.monotonic() - killed < VERDICT_WAIT_S:
        status = await service_status(head, service, fresh_health=True)
        if status.group == DEAD:
            after = time.monotonic() - killed
            if as_json:
                print_json({**status.to_json(), "event": "verdict", "after_s": round(after, 3)})
                return status
            health = status.health
            say(f"  {after:.2f} s after the kill, the console says: group DEAD")
            for node in status.ranks:
                say(f"    {node.words()}")
            say(f"  while the head's /health answers {health.http_status if health else '-'} ({health.status if health else '-'})")
            say("  SGLang's own watchdog would end the head only after --watchdog-timeout (300 s); NCCL RAS calls")
            say("  a silent peer dead after 60 s. status --json carries the same in 'ranks' and 'group'.")
            return status
        await asyncio.sleep(0.1)
    return None
