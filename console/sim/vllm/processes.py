"""vLLM's processes and their bring-up, before the model is built: who runs where, and may it start.

The API server, one engine core per data-parallel replica and one worker process per rank (vLLM 0.32's
multiprocess executor runs a worker even for one GPU), each with its log prefix and pid; then the engine
config line, the DP group leader, each worker's distributed group, and the two refusals that come
before any weight is allocated: a CUDA device that does not exist and a GPU whose free memory is below
what `--gpu-memory-utilization` asks for. The seam: everything here decides which processes exist and
whether they may start; `startup` tells what then fills the GPUs (model build, checkpoint, KV cache,
CUDA graphs).
"""

from __future__ import annotations

from console.domain.fit import ModelSpec
from console.domain.units import GIB
from console.sim.clock import SimClock
from console.sim.engine_args import EngineArgs
from console.sim.ledger import ProcLedger
from console.sim.loading import layout_rng, nccl_buffer_bytes
from console.sim.logfmt import Rank
from console.sim.process import EngineExit, StartupBase
from console.sim.vllm import failures as fail
from console.sim.vllm.args import VLLM_VERSION
from console.sim.vllm.logfmt import Proc, VllmLog, build_vllm_ranks, core_name

#: The simulated processes' pids, as offsets from the API server's (the real ones are spawned in order).
CORE_PID_OFFSET, WORKER_PID_OFFSET = 480, 670


class VllmProcesses(StartupBase):
    """vLLM's API server, engine cores and workers, brought up to the point where the model is built."""

    def __init__(
        self,
        args: EngineArgs,
        spec: ModelSpec,
        config: dict,
        log: VllmLog,
        ledger: ProcLedger,
        clock: SimClock,
        non_default: dict[str, object],
    ) -> None:
        super().__init__(args, spec, config, ledger, clock)
        self.vlog = log
        self.non_default = non_default
        replicas = max(self.layout.dp, 1)
        self.cores = [log.proc(core_name(d, replicas), CORE_PID_OFFSET + 7 * d) for d in range(replicas)]
        # Each worker is `Worker` until its distributed group is up; `worker_in_group` names it after.
        self.workers = [log.proc("Worker", WORKER_PID_OFFSET + r.index) for r in self.ranks]

    def make_ranks(self) -> list[Rank]:
        return build_vllm_ranks(self.layout)

    @property
    def max_model_len(self) -> int:
        return self.args.context_length or self.derived_max_model_len

    @property
    def derived_max_model_len(self) -> int:
        return int(self.text_config().get("max_position_embeddings") or 32768)

    def _core_of(self, rank: Rank) -> Proc:
        return self.cores[rank.dp_rank or 0]

    def _die(self) -> EngineExit:
        """The API server's last words once an engine core is gone; the caller raises the result."""
        fail.api_server_exit(self.vlog)
        return EngineExit(1)

    async def init_engine(self) -> None:
        log, layout = self.vlog, self.layout
        quant = {"none": None, "int": "compressed-tensors"}.get(
            self.spec.quant.method, self.spec.quant.method
        )
        world = len(self.ranks) // max(layout.dp, 1)
        for core in self.cores:
            log.info(
                core,
                "core.py:133",
                f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: "
                f"model={self.args.model_path!r}, speculative_config=None, tokenizer={self.args.model_path!r}, "
                f"skip_tokenizer_init=False, tokenizer_mode=auto, dtype=torch.bfloat16, "
                f"max_seq_len={self.max_model_len}, tensor_parallel_size={layout.tp}, "
                f"pipeline_parallel_size={layout.pp}, data_parallel_size={layout.dp}, "
                f"quantization={quant}, enforce_eager=False, seed=0",
            )
            log.info(
                core,
                "multiproc_executor.py:153",
                "DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1, "
                f"mq_connect_ip=127.0.0.1 (local), world_size={world}, local_world_size={world}",
            )
        await self.at(self.t + 4.5)
        self.join_groups(world)
        if self.missing_device:
            rank = self.missing_device[0]
            worker = self.workers[self.ranks.index(rank)]
            log.line(worker, "ERROR", "multiproc_executor.py:833", "WorkerProc failed to start.")
            log.line(
                worker, "ERROR", "multiproc_executor.py:833", "RuntimeError: CUDA error: invalid device ordinal"
            )
            fail.workers_failed(log, self._core_of(rank))
            raise self._die()
        self.check_free_memory()
        nccl_rng = layout_rng(self.layout, "nccl")
        for mem in self.memories:
            mem.nccl_bytes = nccl_buffer_bytes(self.layout, nccl_rng)
        if world > 1:
            log.raw(
                self.workers[0],
                f"{self.args.host}:{self.workers[0].pid}:{self.workers[0].pid} [0] NCCL INFO "
                "Call to bind failed: Address already in use",
            )
            log.info(self.workers[0], "pynccl.py:111", "vLLM is using nccl==2.27.7")
        self.sync_ledger()

    def join_groups(self, world: int) -> None:
        """Each worker's distributed group; rank 0 says where every rank sits, then workers take their names."""
        log = self.vlog
        for rank, worker in zip(self.ranks, self.workers, strict=True):
            log.info(
                worker,
                "parallel_state.py:1906",
                f"world_size={world} rank={rank.rank_in_world} local_rank={rank.rank_in_world} "
                f"distributed_init_method=tcp://127.0.0.1:{29500 + (rank.dp_rank or 0)} backend=nccl",
            )
        for rank, worker in zip(self.ranks, self.workers, strict=True):
            if rank.rank_in_world == 0:
                log.info(
                    worker,
                    "parallel_state.py:2350",
                    f"rank 0 in world size {world} is assigned as DP rank {rank.dp_rank or 0}, PP rank 0, "
                    "PCP rank 0, TP rank 0, ETP rank 0, EP rank "
                    f"{rank.ep_rank}, EPLB rank N/A",
                )
        self.workers = [worker.renamed(rank.prefix) for rank, worker in zip(self.ranks, self.workers, strict=True)]

    def check_free_memory(self) -> None:
        """vLLM refuses to start when another process already holds what the utilization asks for."""
        other = self.others_bytes()
        util = self.args.gpu_memory_utilization
        for rank, mem, worker in zip(self.ranks, self.memories, self.workers, strict=True):
            mem.other_bytes = other.get(mem.gpu, 0)
            if mem.free_bytes < util * mem.capacity_bytes:
                fail.memory_in_use(
                    self.vlog,
                    self._core_of(rank),
                    worker,
                    mem.free_bytes / GIB,
                    mem.capacity_bytes / GIB,
                    util,
                )
                raise self._die()
