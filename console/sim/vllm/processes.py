"""vLLM's processes and their bring-up, before the model is built: who runs where, and may it start.

The API server, one engine core per data-parallel replica and one worker per rank (the engine core itself
when the layout is one GPU), each with its log prefix and pid; then the engine config line, rank
assignment, and the two refusals that come before any weight is allocated: a CUDA device that does not
exist and a GPU whose free memory is below what `--gpu-memory-utilization` asks for. The seam: everything
here decides which processes exist and whether they may start; `startup` tells what then fills the
GPUs (model build, checkpoint, KV cache, CUDA graphs).
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
from console.sim.vllm.logfmt import Proc, VllmLog, build_vllm_ranks


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
        self.cores = [log.proc(f"EngineCore_DP{d}", 160 + 7 * d) for d in range(replicas)]
        one_gpu = self.layout.tp * self.layout.pp == 1
        self.workers = [
            self.cores[r.dp_rank or 0] if one_gpu else log.proc(r.prefix, 230 + r.index) for r in self.ranks
        ]

    def make_ranks(self) -> list[Rank]:
        return build_vllm_ranks(self.layout)

    @property
    def max_model_len(self) -> int:
        return self.args.context_length or int(self.text_config().get("max_position_embeddings") or 32768)

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
        for core in self.cores:
            log.info(core, "core.py:644", "Waiting for init message from front-end.")
            log.info(
                core,
                "core.py:77",
                f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: "
                f"model={self.args.model_path!r}, speculative_config=None, tokenizer={self.args.model_path!r}, "
                f"dtype=torch.bfloat16, max_seq_len={self.max_model_len}, tensor_parallel_size={layout.tp}, "
                f"pipeline_parallel_size={layout.pp}, data_parallel_size={layout.dp}, "
                f"quantization={quant}, enforce_eager=False, seed=0",
            )
            if layout.tp * layout.pp > 1:
                log.line(
                    core,
                    "WARNING",
                    "multiproc_executor.py:720",
                    "Reducing Torch parallelism from 16 "
                    "threads to 1 to avoid unnecessary CPU contention. Set OMP_NUM_THREADS in the external "
                    "environment to tune this value as needed.",
                )
        await self.at(self.t + 4.5)
        world = len(self.ranks)
        for rank, worker in zip(self.ranks, self.workers, strict=True):
            log.info(
                worker,
                "parallel_state.py:1208",
                f"rank {rank.index} in world size {world} is assigned as "
                f"DP rank {rank.dp_rank or 0}, PP rank {rank.pp_rank}, TP rank {rank.tp_rank}, "
                f"EP rank {rank.ep_rank}",
            )
        if self.missing_device:
            rank = self.missing_device[0]
            worker = self.workers[self.ranks.index(rank)]
            log.line(worker, "ERROR", "multiproc_executor.py:597", "WorkerProc failed to start.")
            log.line(
                worker,
                "ERROR",
                "multiproc_executor.py:597",
                "RuntimeError: CUDA error: invalid device ordinal",
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
            log.info(self.workers[0], "pynccl.py:103", "vLLM is using nccl==2.27.3")
        self.sync_ledger()

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
