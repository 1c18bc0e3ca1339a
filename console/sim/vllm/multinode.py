"""vLLM's own lines for a service over several hosts (multiprocess executor, no Ray).

Node 0 runs the API server, the engine core and its local workers; every other node runs `vllm serve
--headless`, whose process names itself nowhere (its logger lines carry no prefix), logs `Launching vLLM
(v0.32.0) headless multiproc executor, with head node address HOST:PORT for torch.distributed process
group.` (entrypoints/cli/serve.py, run_headless) and runs only workers, which join node 0's process group
at tcp://--master-addr:--master-port. A follower started without `--headless` builds a full engine core
and dies on its first RPC: `AssertionError: collective_rpc should not be called on follower node`.
Serving, a step whose workers never answer ends the engine core after VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS
(300 s) with `TimeoutError: RPC call to sample_tokens timed out.`.
"""

from __future__ import annotations

from console.sim.vllm.args import VLLM_VERSION
from console.sim.vllm.failures import WORKER_FAILED, engine_core_failed
from console.sim.vllm.logfmt import Proc, VllmLog
from console.sim.vllm.tracebacks import API_FRAMES, VLLM, WORKER_FRAMES, Frame, frames

_EXECUTOR = f"{VLLM}/v1/executor/multiproc_executor.py"
_CORE = f"{VLLM}/v1/engine/core.py"
_INIT_DEVICE_FRAMES: list[Frame] = [
    (_EXECUTOR, 433, "__init__", "self.worker.init_device()"),
    (f"{VLLM}/v1/worker/gpu_worker.py", 233, "init_device", "init_worker_distributed_environment("),
    (f"{VLLM}/v1/worker/gpu_worker.py", 877, "init_worker_distributed_environment",
     "init_distributed_environment("),
    (f"{VLLM}/distributed/parallel_state.py", 1460, "init_distributed_environment",
     "torch.distributed.init_process_group("),
]
_STEP_FRAMES: list[Frame] = [
    (_CORE, 926, "run_engine_core", "engine_core.run_busy_loop()"),
    (_CORE, 953, "run_busy_loop", "self._process_engine_step()"),
    (_CORE, 978, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
    (_CORE, 388, "step", "model_output = self.model_executor.sample_tokens(grammar_output)"),
    (_EXECUTOR, 265, "sample_tokens", "return self.collective_rpc("),
    (_EXECUTOR, 358, "collective_rpc", "return aggregate(get_response())"),
    (_EXECUTOR, 341, "get_response", 'raise TimeoutError(f"RPC call to {method} timed out.") from e'),
]
_HEADLESS_FRAMES: list[Frame] = [
    (f"{VLLM}/entrypoints/cli/serve.py", 151, "cmd", "run_headless(args)"),
    (f"{VLLM}/entrypoints/cli/serve.py", 236, "run_headless",
     "executor = MultiprocExecutor(vllm_config, monitor_workers=False)"),
    (f"{VLLM}/v1/executor/abstract.py", 101, "__init__", "self._init_executor()"),
    (_EXECUTOR, 155, "_init_executor", "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
    (_EXECUTOR, 602, "wait_for_ready", "raise e from None"),
]


def headless_launched(log: VllmLog, master_addr: str, master_port: int) -> None:
    """`vllm serve --headless`'s first line on a follower node."""
    log.info(None, "serve.py:231", f"Launching vLLM (v{VLLM_VERSION}) headless multiproc executor, with head "
                                   f"node address {master_addr}:{master_port} for torch.distributed process group.")


def worker_rendezvous_failed(log: VllmLog, worker: Proc, torch_frames: list[str], message: str) -> None:
    """A worker whose init_process_group gave up on the rendezvous."""
    lines = ["WorkerProc failed to start.", "Traceback (most recent call last):",
             *frames(WORKER_FRAMES[:1] + _INIT_DEVICE_FRAMES), *torch_frames, message]
    for text in lines:
        log.line(worker, "ERROR", "multiproc_executor.py:833", text)


def headless_workers_failed(log: VllmLog) -> None:
    """The headless process's own end once one of its workers failed or died while starting."""
    log.raw(None, "Traceback (most recent call last):")
    for text in frames(API_FRAMES[:2] + _HEADLESS_FRAMES):
        log.raw(None, text)
    log.raw(None, WORKER_FAILED)


def follower_without_headless(log: VllmLog, core: Proc) -> None:
    """A node with --node-rank > 0 but no --headless runs an engine core, which may not call the workers."""
    stack = [
        (_CORE, 157, "__init__", "kv_cache_config = self._initialize_kv_caches(vllm_config)"),
        (_CORE, 224, "_initialize_kv_caches",
         "available_gpu_memory = self.model_executor.determine_available_memory()"),
        (_EXECUTOR, 318, "collective_rpc", "assert self.rpc_broadcast_mq is not None, ("),
    ]
    engine_core_failed(log, core, ["AssertionError: collective_rpc should not be called on follower node"], stack)


def rpc_timed_out(log: VllmLog, core: Proc, method: str = "sample_tokens") -> None:
    """The engine core's end once its workers never answered a step within the RPC timeout."""
    lines = ["EngineCore encountered a fatal error.", "Traceback (most recent call last):",
             *frames(_STEP_FRAMES), f"TimeoutError: RPC call to {method} timed out."]
    for text in lines:
        log.line(core, "ERROR", "core.py:935", text)


def worker_died(log: VllmLog, core: Proc, rank: int) -> None:
    """The executor's monitor once a local worker process is gone (after c10d's watchdog aborted it)."""
    log.line(core, "ERROR", "multiproc_executor.py:238",
             f"Worker proc VllmWorker-{rank} died unexpectedly, shutting down executor.")
