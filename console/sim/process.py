"""What every simulated engine process shares: its run loop, its exit, and the GPUs its ranks fill.

An engine (`console.sim.sglang`, `console.sim.vllm`) is a `SimServer` whose `story()` brings it up and
serves, and a `StartupBase` subclass that prints its own start-up milestones. The base classes know
the simulated host (the GPU ledger, the CUDA devices, the story clock) and nothing of either engine's
log format, so neither engine imports the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass
from typing import Protocol

from console.domain.fit import ModelSpec, rank_weight_bytes, torch_capacity_bytes
from console.domain.layout import Layout
from console.domain.sizes import MIB
from console.domain.values import Engine
from console.sim.clock import SimClock
from console.sim.cluster import FAIL_OOM_KILL, ClusterNode, node_ranks
from console.sim.engine_args import EngineArgs, cuda_devices
from console.sim.ledger import ProcLedger, read_inventory, read_processes
from console.sim.loading import OomEvent, cuda_oom_message, layout_rng, make_memories
from console.sim.logfmt import Rank, build_ranks

SHARD_BYTES = 9.3e9  # Kimi K2.x ships 64 shards of ~9.3 GB
RANK_PID_OFFSET = 37  # the launcher's tokenizer and helper processes come first


class EngineExit(Exception):
    """The engine stops here with this exit status (its last lines are already printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True, slots=True)
class StartupReport:
    """What the HTTP server needs to know once the engine is up."""

    max_total_num_tokens: int
    max_running_requests: int
    context_len: int


class Stoppable(Protocol):
    """The HTTP side of a server, stopped when the process ends."""

    async def stop(self) -> None: ...


class StartupBase:
    """A start-up story's ranks, their GPUs and the ledger; subclasses print the milestones."""

    def __init__(self, args: EngineArgs, spec: ModelSpec, config: dict, ledger: ProcLedger,
                 clock: SimClock) -> None:
        self.args, self.spec, self.config = args, spec, config
        self.ledger, self.clock = ledger, clock
        self.layout = args.layout
        self.ranks = self.make_ranks()
        uuids = [g.uuid for g in read_inventory(args.ledger_dir)]
        devices = cuda_devices(args.visible_devices, args.gpu_count, uuids)
        # A rank whose CUDA device does not exist fails in set_device; it never books memory (-1).
        physical = [devices[r.gpu] if 0 <= r.gpu < len(devices) else -1 for r in self.ranks]
        self.missing_device = [r for r, gpu in zip(self.ranks, physical, strict=True) if gpu < 0]
        self.rng = layout_rng(self.layout, "timeline")
        self.capacity_bytes = torch_capacity_bytes(args.gpu_total_mib)
        self.memories = make_memories(physical, self.layout, self.capacity_bytes, self.others_bytes())
        self.util = {m.gpu: 0 for m in self.memories}
        self.power: dict[int, float] = {}
        """A GPU's draw when a stall sets it (spinning at near idle power); unset: it follows utilisation."""
        self.util_frozen = False
        self.t = 0.0
        self.cluster = ClusterNode(args, self.world_ranks(), self.ranks, self.rank_pids(), physical)

    def oom_kill_victim(self) -> int | None:
        """With `--fail oom_kill`: which local rank the kernel's OOM killer takes while weights load (the last)."""
        return len(self.ranks) - 1 if self.args.fail == FAIL_OOM_KILL and self.ranks else None

    def kill_rank(self, i: int) -> None:
        """Local rank i's process is SIGKILLed: it says nothing, its GPU memory is freed, its peers lose it."""
        mem = self.memories[i]
        mem.context_bytes = mem.nccl_bytes = mem.allocated_bytes = mem.reserved_unallocated_bytes = 0
        self.util[mem.gpu] = 0
        self.cluster.link.rank_died(self.ranks[i].index)
        self.sync_ledger()

    def rank_pids(self) -> list[int]:
        """Each local rank's process id (the simulated rank processes are spawned after this one, in order)."""
        return [os.getpid() + RANK_PID_OFFSET + i for i in range(len(self.ranks))]

    def world_ranks(self) -> list[Rank]:
        """Every rank of the service, on every node, in global-rank order (each engine names them its own way)."""
        return build_ranks(self.layout)

    def make_ranks(self) -> list[Rank]:
        """This node's GPU processes, in GPU order: all of them on one host, a block of them per node."""
        return node_ranks(self.world_ranks(), self.args.nnodes, self.args.node_rank, self.args.base_gpu_id,
                          self.args.gpu_id_step)

    def others_bytes(self) -> dict[int, int]:
        """Bytes other live processes hold per GPU (an old engine still exiting, an orphan)."""
        other: dict[int, int] = {}
        for rec in read_processes(self.args.ledger_dir):
            if rec.pid != self.ledger.pid:
                for gpu, mib in rec.used_mib.items():
                    other[gpu] = other.get(gpu, 0) + mib * MIB
        return other

    def sync_ledger(self) -> None:
        """Write every GPU's footprint and utilisation to the ledger (one file write)."""
        for mem in self.memories:
            if mem.gpu >= 0:
                self.ledger.set(mem.gpu, used_mib=mem.used_mib, util_pct=self.util.get(mem.gpu, 0),
                                power_w=self.power.get(mem.gpu))
        self.ledger.flush()

    def set_util(self, low: int, high: int) -> None:
        for mem in self.memories:
            self.util[mem.gpu] = self.rng.randint(low, high)

    def show_stall(self, kind: str) -> None:
        """The cards once a stall began: all idle (a blocked scheduler launches nothing), all spinning in
        a collective (~100 % at near idle power), or one idle (the diverged rank, the 4th or the last)
        while the rest spin."""
        from console.sim.stall import FAIL_DIVERGED, FAIL_SPIN, IDLE_POWER_W, SPIN_POWER_W

        self.util_frozen = True
        gpus = [m.gpu for m in self.memories if m.gpu >= 0]
        odd = gpus[min(3, len(gpus) - 1)] if gpus else None
        for gpu in gpus:
            spin = kind == FAIL_SPIN or (kind == FAIL_DIVERGED and gpu != odd)
            self.util[gpu] = self.rng.randint(98, 100) if spin else 0
            self.power[gpu] = SPIN_POWER_W + self.rng.random() * 4 if spin else IDLE_POWER_W + gpu * 0.37
        self.sync_ledger()

    def stall_ended(self) -> None:
        """Steps run again: the cards follow the load again."""
        self.util_frozen = False
        self.power.clear()
        self.ledger.power_w.clear()

    def on_load(self, running: int) -> None:
        """nvidia-smi shows the cards busy while requests run and idle otherwise (frozen once stalled)."""
        if self.util_frozen:
            return
        self.set_util(0, 1) if running == 0 else self.set_util(min(60 + 9 * running, 90), 99)
        self.sync_ledger()

    async def at(self, story_s: float) -> None:
        self.t = story_s
        await self.clock.until(story_s)

    def catch_up(self) -> None:
        """After waiting on other nodes, the story goes on from now, not from where it stopped."""
        self.t = max(self.t, self.clock.now())

    def text_config(self) -> dict:
        """The language model's own config (a multimodal config nests it under `text_config`)."""
        text = self.config.get("text_config")
        return text if isinstance(text, dict) else self.config

    def shard_count(self) -> int:
        """Checkpoint shards: from an index file next to the config if there is one, else by size."""
        index = self.args.config_path.parent / "model.safetensors.index.json"
        try:
            weight_map = json.loads(index.read_text()).get("weight_map", {})
            if weight_map:
                return len(set(weight_map.values()))
        except (OSError, ValueError, AttributeError):
            pass
        return max(1, round(rank_weight_bytes(self.spec, Layout(), Engine.SGLANG, 0) / SHARD_BYTES))

    def oom_message(self, event: OomEvent, alloc_conf: str = "PYTORCH_CUDA_ALLOC_CONF") -> str:
        """PyTorch's OOM message with the failing rank's true figures."""
        mem = self.memories[self.ranks.index(event.rank)]
        # PyTorch names the CUDA device, which is not nvidia-smi's index under CUDA_VISIBLE_DEVICES.
        return cuda_oom_message(
            gpu=event.rank.gpu, tried_bytes=event.tried_bytes, capacity_bytes=mem.capacity_bytes,
            free_bytes=mem.free_bytes, in_use_bytes=mem.in_use_bytes, allocated_bytes=mem.allocated_bytes,
            reserved_unallocated_bytes=mem.reserved_unallocated_bytes, alloc_conf=alloc_conf)


class SimServer:
    """One engine process: its story runs until it fails, or until SIGTERM/SIGINT stops it cleanly."""

    process_name = "python"

    def __init__(self, args: EngineArgs, spec: ModelSpec, config: dict) -> None:
        self.args, self.spec, self.config = args, spec, config
        self.clock = SimClock(args.time_scale)
        self.ledger = ProcLedger(args.ledger_dir, name=self.process_name)
        self.http: Stoppable | None = None
        self.cluster: ClusterNode | None = None
        """This node's part in a service over several hosts, once its start-up has made it."""
        self.stop_requested = asyncio.Event()

    async def run(self) -> int:
        """Run until stopped or failed; returns the exit status."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop_requested.set)
        story = asyncio.create_task(self.story())
        stopper = asyncio.create_task(self.stop_requested.wait())
        try:
            await asyncio.wait({story, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if story.done():
                exc = story.exception()
                if isinstance(exc, EngineExit):
                    return exc.code
                if exc is not None:
                    raise exc
                return 0
            story.cancel()
            with contextlib.suppress(asyncio.CancelledError, EngineExit):
                await story
            await self.shutdown()
            return 0
        finally:
            stopper.cancel()
            if self.http is not None:
                await self.http.stop()
            if self.cluster is not None:
                await self.cluster.close()
            self.ledger.remove()

    async def story(self) -> None:
        """Start-up, HTTP, then serve until cancelled; raises EngineExit on a failure."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """The server's last lines after a clean stop (uvicorn's, when it was up)."""
