"""The simulated vLLM start-up, milestone by milestone, with vLLM 0.32's own log lines.

vLLM builds the whole model first (every parameter is allocated with `torch.empty` as the layers are
constructed, fast) and only then reads the checkpoint into it (the shard progress bar). So a layout
whose weights do not fit dies a second or two after `Starting to load model`, before any shard is read.
Then torch.compile, the memory profile (`Available KV cache memory`), the KV cache (`GPU KV cache size: N
tokens, Maximum concurrency ...`), CUDA graphs and `init engine ... took`. The lines and their order are
held to a real vLLM 0.32's (tests/fixtures/vllm-real/, tests/unit/test_sim_vllm_fidelity.py). Story time at scale 1.0 for Qwen3-235B-A22B-FP8 on 4x H100 TP4:
API server and engine core ~12 s, model build ~2 s, weights ~9 s, compile and profile ~7 s, graphs ~6 s.

The processes and their checks before the model is built (engine config, rank assignment, a missing
device, memory already in use) live in `processes`; this module tells what fills the GPUs.
"""

from __future__ import annotations

import asyncio

from console.domain.fit import kv_bytes_per_token, placement, rank_load_plan, vllm_activation_bytes
from console.domain.sizes import GIB
from console.domain.values import Engine
from console.sim.loading import OomEvent, RankLoader, fragmentation_bytes, layout_rng, rank_rates
from console.sim.logfmt import capture_progress, shard_progress
from console.sim.process import EngineExit, StartupReport
from console.sim.vllm import failures as fail
from console.sim.vllm import multinode
from console.sim.vllm.processes import VllmProcesses

VLLM = Engine.VLLM
#: Building the model only allocates (no reads): far faster than loading the checkpoint.
BUILD_RATE_BYTES_PER_S = 28 * GIB
MAX_NUM_SEQS = 256
BLOCK_SIZE = 16
GRAPH_SIZES = 67
COMPILE_S = 5.9


class VllmStartup(VllmProcesses):
    """Runs vLLM's start-up up to (not including) the API server's HTTP routes."""

    # -- the story -------------------------------------------------------------------------------
    async def run(self) -> StartupReport:
        """All milestones up to `init engine ... took`; raises EngineExit on a failure."""
        log = self.vlog
        api = None if self.args.headless else log.api  # `vllm serve --headless` starts no API server
        if api is not None:
            for line in fail.banner(self.args.model_path):
                log.info(api, "api_utils.py:347", line)
            log.info(api, "api_utils.py:286", f"non-default args: {self.non_default!r}")
        self.sync_ledger()
        await self.at(4.0)
        log.info(api, "model.py:733", f"Resolved architecture: {self.spec.architecture}")
        if self.max_model_len > self.derived_max_model_len:
            fail.max_model_len_too_long(log, self.max_model_len, self.derived_max_model_len)
            raise EngineExit(1)
        log.info(api, "model.py:2152", f"Using max model len {self.max_model_len}")
        await self.at(7.0)
        await self.init_engine()
        await self.build_model()
        await self.load_checkpoint()
        if self.args.node_rank > 0 and not self.args.headless:
            multinode.follower_without_headless(log, self.cores[0])
            raise self._die()
        init_begin = self.t
        tokens = await self.profile_and_kv_cache()
        await self.cuda_graphs()
        for core in self.engine_cores:
            log.info(
                core,
                "core.py:402",
                "init engine (profile, create kv cache, warmup model) took "
                f"{self.t - init_begin:.2f} s (compilation: {COMPILE_S:.2f} s)",
            )
        await self.cluster.barrier("ready")  # node 0 serves only once every node's workers are ready
        self.catch_up()
        return StartupReport(tokens, MAX_NUM_SEQS, self.max_model_len)

    @property
    def engine_cores(self) -> list:
        """The engine cores this node runs (none on a headless node)."""
        return [] if self.args.headless else self.cores

    def cache_info(self, report: StartupReport) -> dict[str, str]:
        """cache_config_info's labels for this run, as the real server fills them."""
        tokens = report.max_total_num_tokens
        return {"block_size": str(BLOCK_SIZE), "cache_dtype": "auto", "enable_prefix_caching": "True",
                "gpu_memory_utilization": str(self.args.gpu_memory_utilization),
                "kv_cache_size_tokens": str(tokens), "num_gpu_blocks": str(tokens // BLOCK_SIZE),
                "kv_cache_max_concurrency": str(round(tokens / self.max_model_len, 2)),
                "prefix_caching_hash_algo": "sha256"}  # fmt: skip

    async def build_model(self) -> None:
        log = self.vlog
        await self.at(self.t + 0.8)
        for worker in self.workers:
            log.info(worker, "gpu_model_runner.py:4212", f"Starting to load model {self.args.model_path}...")
        log.info(self.workers[0], "cuda.py:402", "Using FLASH_ATTN attention backend out of potential backends")
        frag_rng = layout_rng(self.layout, "fragmentation")
        loaders = []
        for rank, mem in zip(self.ranks, self.memories, strict=True):
            mem.reserved_unallocated_bytes = fragmentation_bytes(frag_rng)
            plan = rank_load_plan(self.spec, self.layout, VLLM, rank.index)
            loaders.append(RankLoader(rank, mem, plan, BUILD_RATE_BYTES_PER_S))
        self.set_util(5, 15)
        begin, tick, build_s = self.t, max(0.1, 0.01 / self.args.time_scale), 0.0
        while any(build_s < ld.finish_s for ld in loaders):
            build_s += tick
            await self.at(begin + build_s)
            events = [ev for ld in loaders if (ev := ld.advance(build_s)) is not None]
            self.sync_ledger()
            if events:
                self.report_oom(sorted(events, key=lambda e: (e.at_s, e.rank.index)))
                raise self._workers_failed(events[0].rank)
        self._weight_bytes = [ld.total_bytes for ld in loaders]

    def report_oom(self, events: list[OomEvent]) -> None:
        for event in events:
            message = self.oom_message(event, alloc_conf="PYTORCH_ALLOC_CONF")
            moe = ".experts." in event.tensor_name
            worker = self.workers[self.ranks.index(event.rank)]
            fail.worker_oom(self.vlog, worker, message, self.spec.model_type, moe)

    async def load_checkpoint(self) -> None:
        """Read the shards into the built model (no new memory)."""
        log = self.vlog
        rates = rank_rates(self.ranks, self.layout)
        durations = [nbytes / rate for nbytes, rate in zip(self._weight_bytes, rates, strict=True)]
        shards, begin = self.shard_count(), self.t
        self.set_util(30, 48)
        log.raw(None, shard_progress(0, shards, 0.0))  # tqdm writes bare lines to stderr
        steps = min(shards, 8)
        victim = self.oom_kill_victim()
        for step in range(1, steps + 1):
            elapsed = durations[0] * step / steps
            await self.at(begin + elapsed)
            if victim is not None and step > steps // 2:
                # The kernel kills a worker reading its shards: it says nothing, its READY pipe closes.
                self.kill_rank(victim)
                raise self._workers_failed(self.ranks[victim])
            log.raw(None, shard_progress(shards * step // steps, shards, elapsed))
        await self.at(begin + max(durations))
        for worker, nbytes, took in zip(self.workers, self._weight_bytes, durations, strict=True):
            log.info(worker, "default_loader.py:501", f"Loading weights took {took:.2f} seconds")
            log.info(
                worker,
                "gpu_model_runner.py:4270",
                f"Model loading took {nbytes / GIB:.2f} GiB memory and {took + 1.6:.6f} seconds",
            )
        self.set_util(0, 3)
        self.sync_ledger()

    async def profile_and_kv_cache(self) -> int:
        log, util = self.vlog, self.args.gpu_memory_utilization
        worker0 = self.workers[0]
        log.info(
            worker0,
            "backends.py:620",
            "Using cache directory: /root/.cache/vllm/torch_compile_cache/"
            f"{abs(hash(self.layout.name)) % 16**10:010x}/rank_0_0/backbone for vLLM's torch.compile",
        )
        self.set_util(60, 90)
        self.sync_ledger()
        await self.at(self.t + COMPILE_S)
        log.info(worker0, "monitor.py:48", f"torch.compile takes {COMPILE_S:.2f} s in total")
        await self.at(self.t + 1.0)
        peak = vllm_activation_bytes(self.spec, self.layout)
        cells, avail = [], []
        for rank, mem in zip(self.ranks, self.memories, strict=True):
            where = placement(self.spec, self.layout, VLLM, rank.index)
            cells.append(kv_bytes_per_token(self.spec, where.end_layer - where.first_layer, where.attn_tp))
            given = self.args.kv_cache_memory_bytes
            avail.append(given if given is not None else int(util * mem.capacity_bytes - mem.in_use_bytes - peak))
        for worker, kv in zip(self.workers, avail, strict=True):
            log.info(worker, "gpu_worker.py:721", f"Available KV cache memory: {max(kv, 0) / GIB:.2f} GiB")
        # The engine core sizes the cache from every worker's answer, on every node: the smallest wins.
        least = int(await self.cluster.allreduce_min("kv_available_bytes", min(avail)))
        tokens = min(kv // cell for kv, cell in zip(avail, cells, strict=True)) // BLOCK_SIZE * BLOCK_SIZE
        tokens = int(await self.cluster.allreduce_min("num_gpu_tokens", tokens))
        self.catch_up()
        max_len = self.max_model_len
        short = self.args.fail == "kv" or least <= 0 or tokens < max_len
        if short and self.args.headless:
            await asyncio.Event().wait()  # node 0's engine core fails; a headless node's workers never exit
        core = self.cores[0]
        if self.args.fail == "kv" or least <= 0:
            fail.no_cache_blocks(log, core)
            raise self._die()
        if tokens < max_len:
            heaviest = max(cells)
            fail.kv_below_max_len(log, core, max_len, max_len * heaviest / GIB, least / GIB, tokens)
            raise self._die()
        await self.at(self.t + 0.5)
        for mem, cell in zip(self.memories, cells, strict=True):
            mem.allocated_bytes += tokens * cell
        self.sync_ledger()
        for core in self.engine_cores:
            log.info(
                core,
                "kv_cache_utils.py:2327",
                f"GPU KV cache size: {tokens:,} tokens, "
                f"Maximum concurrency for {max_len:,} tokens per request: {tokens / max_len:.2f}x",
            )
        return tokens

    async def cuda_graphs(self) -> None:
        log = self.vlog
        self.set_util(88, 97)
        duration = 5.5 + self.rng.uniform(0, 1.0)
        graph_bytes = [int((0.7 + self.rng.uniform(0, 0.3)) * GIB) for _ in self.memories]
        begin, steps = self.t, 4
        for step in range(1, steps + 1):
            await self.at(begin + duration * step / steps)
            for mem, nbytes in zip(self.memories, graph_bytes, strict=True):
                mem.allocated_bytes += nbytes // steps
            self.sync_ledger()
            done = GRAPH_SIZES * step // steps
            bar = capture_progress(0, 0.0, done, GRAPH_SIZES, duration * step / steps)
            log.raw(None, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): " + bar.split(": ", 1)[1])
        for worker, nbytes in zip(self.workers, graph_bytes, strict=True):
            log.info(
                worker,
                "gpu_model_runner.py:5368",
                f"Graph capturing finished in {round(duration)} secs, took {nbytes / GIB:.2f} GiB",
            )
        self.set_util(0, 2)
        self.sync_ledger()
