"""The simulated SGLang start-up, milestone by milestone, with SGLang's own log lines.

Story time at scale 1.0 for Kimi K2.6 int4 on 8x 96 GB: launcher and init distributed ~4 s, weights
~11.6 s (TP8/EP8; ~6.3 GiB/s per GPU), KV pool ~1.5 s, CUDA graphs ~10 s, then HTTP and warm-up (the
engine module does those). TP4 EP2 needs ~142 GiB per GPU and overflows about 15 s into loading.
"""

from __future__ import annotations

import asyncio
import math

from console.domain.fit import (
    ModelSpec,
    kv_bytes_per_token,
    placement,
    rank_load_plan,
    sglang_default_mem_fraction,
)
from console.domain.sizes import GIB
from console.domain.values import Engine
from console.sim.clock import SimClock
from console.sim.cluster import RENDEZVOUS_FRAMES, RendezvousPortTaken, RendezvousTimeout
from console.sim.engine_args import EngineArgs
from console.sim.ledger import ProcLedger
from console.sim.loading import (
    OomEvent,
    RankLoader,
    fragmentation_bytes,
    layout_rng,
    nccl_buffer_bytes,
    rank_rates,
)
from console.sim.logfmt import capture_progress, shard_progress
from console.sim.process import EngineExit, StartupBase, StartupReport
from console.sim.sglang import failures
from console.sim.sglang.logfmt import EngineLog
from console.sim.sglang.server_args import server_args_line

LAUNCH_S = 5.0  # tokenizer, processor and scheduler processes start before init distributed
NCCL_HANG_S = 20.0  # the watchdog fires after this much story time (its message keeps the real timeout)
CAPTURE_BATCH_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128,
                       136, 144, 152, 160, 192, 224, 256)
SGLANG = Engine.SGLANG


class SglangStartup(StartupBase):
    """Runs SGLang's start-up story up to (not including) the HTTP server."""

    def __init__(self, args: EngineArgs, spec: ModelSpec, config: dict, log: EngineLog,
                 ledger: ProcLedger, clock: SimClock) -> None:
        self.log = log
        super().__init__(args, spec, config, ledger, clock)

    def fail(self, lines: list[str]) -> EngineExit:
        """Print a scheduler's traceback and the launcher's reaction; the caller raises the result."""
        for line in lines:
            self.log.raw(line)
        self.log.log(failures.SIGQUIT_LINE)
        return EngineExit(1)

    # -- the story -------------------------------------------------------------------------------
    async def run(self) -> StartupReport:
        """All milestones up to CUDA graphs; raises EngineExit on a failure."""
        self.log.log(server_args_line(self.args, self.mem_fraction()))
        self.sync_ledger()
        await self.init_distributed()
        await self.load_weights()
        tokens = await self.kv_pool()
        await self.cuda_graphs()
        context_len = self.args.context_length or int(self.text_config().get("max_position_embeddings")
                                                      or 32768)
        max_running = self.args.max_running_requests or max(1, min(4096, tokens // 2))
        self.log.log(
            f"max_total_num_tokens={tokens}, chunked_prefill_size={self.args.chunked_prefill_size}, "
            f"max_prefill_tokens=16384, max_running_requests={max_running}, context_len={context_len}, "
            f"available_gpu_mem={self.memories[0].avail_gb():.2f} GB",
            self.ranks[0],
        )
        await self.cluster.barrier("ready")  # node 0 serves only once every node's ranks are ready
        self.catch_up()
        return StartupReport(tokens, max_running, context_len)

    def mem_fraction(self) -> float:
        if self.args.mem_fraction_static is not None:
            return self.args.mem_fraction_static
        return round(sglang_default_mem_fraction(self.spec, self.layout, self.args.gpu_total_mib), 3)

    async def init_distributed(self) -> None:
        await self.at(LAUNCH_S)
        order = sorted(self.ranks, key=lambda r: self.rng.random())
        for rank in order:
            self.log.log("Init torch distributed begin.", rank)
        if self.missing_device:
            raise self.fail(failures.invalid_device_lines(self.missing_device[0].prefix))
        if self.args.fail == "nccl":
            await self.at(self.t + NCCL_HANG_S)
            timeout_ms = (self.args.dist_timeout_s or 600) * 1000
            stuck = self.ranks[-1].index
            lines: list[str] = []
            for rank in self.ranks:
                if rank.index != stuck or len(self.ranks) == 1:
                    lines += failures.nccl_watchdog_lines(
                        rank.index, timeout_ms=timeout_ms, ran_ms=timeout_ms + self.rng.randint(5, 95))
            raise self.fail(lines)
        try:
            await self.cluster.join()
        except (RendezvousTimeout, RendezvousPortTaken) as exc:
            raise self.fail(failures.rendezvous_lines(self.ranks[0].prefix, RENDEZVOUS_FRAMES,
                                                      self.cluster.rendezvous_error(exc))) from None
        self.catch_up()
        await self.at(self.t + 2.2 + self.rng.uniform(0, 0.4))
        nccl_rng = layout_rng(self.layout, "nccl")
        for rank, mem in zip(self.ranks, self.memories, strict=True):
            mem.nccl_bytes = nccl_buffer_bytes(self.layout, nccl_rng)
            self.log.log(f"Init torch distributed ends. mem usage={mem.nccl_bytes / GIB:.2f} GB", rank)
        self.sync_ledger()

    async def load_weights(self) -> None:
        await self.at(self.t + 0.05)
        frag_rng = layout_rng(self.layout, "fragmentation")
        other = self.others_bytes()  # CUDA's free memory is live: whatever others hold now counts
        for mem in self.memories:
            mem.other_bytes = other.get(mem.gpu, 0)
        rates = rank_rates(self.ranks, self.layout)
        loaders = []
        for rank, mem, rate in zip(self.ranks, self.memories, rates, strict=True):
            self.log.log(f"Load weight begin. avail mem={mem.avail_gb():.2f} GB", rank)
            mem.reserved_unallocated_bytes = fragmentation_bytes(frag_rng)
            plan = rank_load_plan(self.spec, self.layout, SGLANG, rank.index)
            loaders.append(RankLoader(rank, mem, plan, rate))
        shards = self.shard_count()
        self.log.raw(shard_progress(0, shards, 0.0))
        self.set_util(30, 48)
        begin = self.t
        tick = max(0.1, 0.01 / self.args.time_scale)  # ~100 ms of story time, at least 10 ms real
        shown, ended, load_s = 0, set(), 0.0
        victim = self.oom_kill_victim()
        while len(ended) < len(loaders):
            load_s += tick
            await self.at(begin + load_s)
            if victim is not None and victim not in ended and load_s >= loaders[victim].finish_s / 2:
                self.kill_rank(victim)
                ended.add(victim)
            live = [ld for i, ld in enumerate(loaders) if i != victim or victim not in ended]
            events = [ev for ld in live if (ev := ld.advance(load_s)) is not None]
            self.sync_ledger()
            if events:
                raise self.fail(self.oom_lines(min(events, key=lambda e: (e.at_s, e.rank.index))))
            done = int(loaders[0].progress_fraction(load_s) * shards)
            if done > shown:
                shown = done
                self.log.raw(shard_progress(done, shards, min(load_s, loaders[0].finish_s)))
            for i, ld in enumerate(loaders):
                if i not in ended and load_s >= ld.finish_s:
                    ended.add(i)
                    self.log.log(
                        f"Load weight end. elapsed={ld.finish_s:.2f} s, type={self.spec.architecture}, "
                        f"avail mem={ld.memory.avail_gb():.2f} GB, "
                        f"mem usage={(ld.memory.allocated_bytes + ld.memory.reserved_unallocated_bytes) / GIB:.2f}"
                        " GB.", ld.rank)
        self.set_util(0, 3)
        self.sync_ledger()
        if victim is not None:
            # PR #20287: the others wait in the next collective and the launcher on its pipes, for ever.
            await asyncio.Event().wait()

    def oom_lines(self, event: OomEvent) -> list[str]:
        return failures.cuda_oom_lines(rank_prefix=event.rank.prefix, message=self.oom_message(event),
                                       model_type=self.spec.model_type, moe_tensor=".experts." in event.tensor_name)

    async def kv_pool(self) -> int:
        await self.at(self.t + 0.3)
        if self.args.fail == "kv":
            raise self.fail(failures.kv_too_small_lines(self.ranks[0].prefix))
        fraction = self.mem_fraction()
        cells = []
        for rank in self.ranks:
            where = placement(self.spec, self.layout, SGLANG, rank.index)
            cells.append(kv_bytes_per_token(self.spec, where.end_layer - where.first_layer, where.attn_tp))
        # Every rank sizes its pool from the smallest free memory of the group, over every node (SGLang
        # all-reduces the minimum), and the pool's tokens are the smallest any rank can hold.
        free = await self.cluster.allreduce_min("min_free_bytes", min(m.free_bytes for m in self.memories))
        rest = free - self.capacity_bytes * (1 - fraction)
        tokens = min(int(rest // cell) for cell in cells) if rest > 0 else 0
        tokens = int(await self.cluster.allreduce_min("max_total_num_tokens", tokens))
        self.catch_up()
        if tokens <= 0:
            raise self.fail(failures.kv_too_small_lines(self.ranks[0].prefix))
        self.set_util(4, 9)
        await self.at(self.t + 1.0 + self.rng.uniform(0, 0.4))
        for rank, mem, cell in zip(self.ranks, self.memories, cells, strict=True):
            kv_bytes = tokens * cell
            mem.allocated_bytes += kv_bytes
            if self.spec.attention == "mla":
                self.log.log(f"KV Cache is allocated. #tokens: {tokens}, KV size: {kv_bytes / GIB:.2f} GB", rank)
            else:
                half = kv_bytes / 2 / GIB
                self.log.log(f"KV Cache is allocated. #tokens: {tokens}, K size: {half:.2f} GB, "
                             f"V size: {half:.2f} GB", rank)
            self.log.log(f"Memory pool end. avail mem={mem.avail_gb():.2f} GB", rank)
        self.sync_ledger()
        return tokens

    async def cuda_graphs(self) -> None:
        await self.at(self.t + 0.2)
        for rank, mem in zip(self.ranks, self.memories, strict=True):
            self.log.log("Capture cuda graph begin. This can take up to several minutes. "
                         f"avail mem={mem.avail_gb():.2f} GB", rank)
        self.set_util(88, 97)
        self.sync_ledger()
        sizes = [bs for bs in CAPTURE_BATCH_SIZES if bs <= self.args.cuda_graph_max_bs] or [1]
        duration = 9.5 + self.rng.uniform(0, 1.0)
        graph_bytes = [int((0.6 + self.rng.uniform(0, 0.3)) * GIB) for _ in self.memories]
        begin = self.t
        steps = 4
        for step in range(1, steps + 1):
            await self.at(begin + duration * step / steps)
            for mem, nbytes in zip(self.memories, graph_bytes, strict=True):
                mem.allocated_bytes += nbytes // steps
            self.sync_ledger()
            n = math.ceil(len(sizes) * step / steps)
            self.log.raw(capture_progress(sizes[len(sizes) - n], self.memories[0].avail_gb(), n, len(sizes),
                                          duration * step / steps))
            if self.args.fail == "cuda_graph" and step == 2:
                raise self.fail(failures.cuda_graph_lines(self.ranks[0].prefix))
        for rank, mem, nbytes in zip(self.ranks, self.memories, graph_bytes, strict=True):
            self.log.log(f"Capture cuda graph end. Time elapsed: {duration:.2f} s. mem usage="
                         f"{nbytes / GIB:.2f} GB. avail mem={mem.avail_gb():.2f} GB.", rank)
        self.set_util(0, 2)
        self.sync_ledger()
