"""vLLM's processes and their bring-up, before the model is built: who runs where, and may it start.

The API server, one engine core per data-parallel replica and one worker process per rank (vLLM 0.32's
multiprocess executor runs a worker even for one GPU), each with its log prefix and pid; then the engine
config line, the DP group leader, each worker's distributed group, and the two refusals that come
before any weight is allocated: a CUDA device that does not exist and a GPU whose free memory is below
what `--gpu-memory-utilization` asks for. The seam: everything here decides which processes exist and
whether they may start; `startup` tells what then fills the GPUs (model build, checkpoint, KV cache,
CUDA graphs).

Over several hosts (`--nnodes`), node 0 runs all of that for its block of ranks, and the workers of
every node meet in one process group at tcp://--master-addr:--master-port; a `--headless` node runs its
workers only, and its failures end in its own process's traceback instead of an engine core's.
"""

from __future__ import annotations

from console.domain.fit import ModelSpec
from console.domain.sizes import GIB
from console.sim.clock import SimClock
from console.sim.cluster import RENDEZVOUS_FRAMES, RendezvousPortTaken, RendezvousTimeout, split_host_port
from console.sim.engine_args import EngineArgs
from console.sim.ledger import ProcLedger
from console.sim.loading import layout_rng, nccl_buffer_bytes
from console.sim.logfmt import Rank
from console.sim.process import EngineExit, StartupBase
from console.sim.vllm import failures as fail
from console.sim.vllm import multinode
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
        self.vlog = log  # before the base class asks for the workers' pids
        super().__init__(args, spec, config, ledger, clock)
        self.non_default = non_default
        replicas = max(self.layout.dp, 1)
        # A headless node runs no engine core; these are only named for the failures' signature.
        self.cores = [log.proc(core_name(d, replicas), CORE_PID_OFFSET + 7 * d) for d in range(replicas)]
        # Each worker is `Worker` until its distributed group is up; `assign_ranks` names it after.
        self.workers = [Proc("Worker", pid) for pid in self.rank_pids()]
        self.master_addr, self.master_port = split_host_port(args.dist_init_addr or "127.0.0.1:29501")

    def world_ranks(self) -> list[Rank]:
        return build_vllm_ranks(self.layout)

    def rank_pids(self) -> list[int]:
        return [self.vlog.api.pid + WORKER_PID_OFFSET + i for i in range(len(self.ranks))]

    @property
    def max_model_len(self) -> int:
        return self.args.context_length or self.derived_max_model_len

    @property
    def derived_max_model_len(self) -> int:
        return int(self.text_config().get("max_position_embeddings") or 32768)

    def _core_of(self, rank: Rank) -> Proc:
        return self.cores[rank.dp_rank or 0]

    def _die(self) -> EngineExit:
        """This node's last words once its start failed; the caller raises the result."""
        if self.args.headless:
            multinode.headless_workers_failed(self.vlog)
        else:
            fail.api_server_exit(self.vlog)
        return EngineExit(1)

    def _workers_failed(self, rank: Rank) -> EngineExit:
        """A worker failed to start: the engine core's view (none on a headless node), then the node's end."""
        if not self.args.headless:
            fail.workers_failed(self.vlog, self._core_of(rank))
        return self._die()

    async def init_engine(self) -> None:
        log, layout = self.vlog, self.layout
        quant = {"none": None, "int": "compressed-tensors"}.get(
            self.spec.quant.method, self.spec.quant.method
        )
        world = layout.tp * layout.pp
        local_world = len(self.ranks) // max(layout.dp, 1)
        if self.args.headless:
            multinode.headless_launched(log, self.master_addr, self.master_port)
        for core in [] if self.args.headless else self.cores:
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
            if self.args.node_rank == 0:  # only the leader node of the DP group says so
                node, ip = self.args.node_rank, self.cluster.link.seat.ip or "127.0.0.1"
                log.info(
                    core,
                    "multiproc_executor.py:153",
                    f"DP group leader: node_rank={node}, node_rank_within_dp={node}, master_addr={self.master_addr}, "
                    f"mq_connect_ip={ip} (local), world_size={world}, local_world_size={local_world}",
                )
        await self.at(self.t + 4.5)
        self.announce_workers(world)
        if self.missing_device:
            rank = self.missing_device[0]
            worker = self.workers[self.ranks.index(rank)]
            log.line(worker, "ERROR", "multiproc_executor.py:833", "WorkerProc failed to start.")
            log.line(
                worker, "ERROR", "multiproc_executor.py:833", "RuntimeError: CUDA error: invalid device ordinal"
            )
            raise self._workers_failed(rank)
        try:
            await self.cluster.join()
        except (RendezvousTimeout, RendezvousPortTaken) as exc:
            multinode.worker_rendezvous_failed(log, self.workers[0], RENDEZVOUS_FRAMES,
                                               self.cluster.rendezvous_error(exc))
            raise self._workers_failed(self.ranks[0]) from None
        self.catch_up()
        self.assign_ranks(world)
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

    def announce_workers(self, world: int) -> None:
        """Each worker's distributed group: its place in the world and where the group meets."""
        spans = self.cluster.spans_hosts
        for i, (rank, worker) in enumerate(zip(self.ranks, self.workers, strict=True)):
            if spans:  # every node's workers meet at node 0's --master-addr:--master-port
                local, method = i, f"tcp://{self.master_addr}:{self.master_port}"
            else:
                local, method = rank.rank_in_world, f"tcp://127.0.0.1:{29500 + (rank.dp_rank or 0)}"
            self.vlog.info(
                worker,
                "parallel_state.py:1906",
                f"world_size={world} rank={rank.rank_in_world} local_rank={local} "
                f"distributed_init_method={method} backend=nccl",
            )

    def assign_ranks(self, world: int) -> None:
        """Global rank 0 says where every rank sits; then the workers take their names."""
        log = self.vlog
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
                    worker,
                    mem.free_bytes / GIB,
                    mem.capacity_bytes / GIB,
                    util,
                )
                raise self._workers_failed(rank)
