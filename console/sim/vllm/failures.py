"""The failure texts a real vLLM 0.11 server writes, with this run's true figures filled in.

A worker that fails while the model is built logs `WorkerProc failed to start.` and its traceback; the
engine core then logs `EngineCore failed to start.` (its own traceback ends in the workers' summary);
the API server's last words are `RuntimeError: Engine core initialization failed. See root cause above.`
Every traceback line carries its process's prefix and, for logged ones, its logger header.
"""

from __future__ import annotations

from console.sim.logfmt import SITE
from console.sim.vllm.logfmt import Proc, VllmLog

_VLLM = f"{SITE}/vllm"
_Frame = tuple[str, int, str, str]

_WORKER_FRAMES: list[_Frame] = [
    (
        f"{_VLLM}/v1/executor/multiproc_executor.py",
        571,
        "worker_main",
        "worker = WorkerProc(*args, **kwargs)",
    ),
    (f"{_VLLM}/v1/executor/multiproc_executor.py", 437, "__init__", "self.worker.load_model()"),
    (
        f"{_VLLM}/v1/worker/gpu_worker.py",
        213,
        "load_model",
        "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
    ),
    (f"{_VLLM}/v1/worker/gpu_model_runner.py", 2602, "load_model", "self.model = model_loader.load_model("),
    (
        f"{_VLLM}/model_executor/model_loader/base_loader.py",
        45,
        "load_model",
        "model = initialize_model(vllm_config=vllm_config,",
    ),
    (
        f"{_VLLM}/model_executor/model_loader/utils.py",
        63,
        "initialize_model",
        "return model_class(vllm_config=vllm_config, prefix=prefix)",
    ),
]
_MOE_FRAMES: list[_Frame] = [
    (
        f"{_VLLM}/model_executor/layers/fused_moe/layer.py",
        1180,
        "__init__",
        "self.quant_method.create_weights(layer=self, **moe_quant_params)",
    ),
    (
        f"{_VLLM}/model_executor/layers/quantization/fp8.py",
        623,
        "create_weights",
        "w13_weight = torch.nn.Parameter(torch.empty(",
    ),
]
_DENSE_FRAMES: list[_Frame] = [
    (f"{_VLLM}/model_executor/layers/linear.py", 431, "__init__", "self.quant_method.create_weights("),
    (f"{_VLLM}/model_executor/layers/linear.py", 205, "create_weights", "weight = Parameter(torch.empty("),
]
_TORCH_FRAME: _Frame = (
    f"{SITE}/torch/utils/_device.py",
    104,
    "__torch_function__",
    "return func(*args, **kwargs)",
)
_CORE_FRAMES: list[_Frame] = [
    (f"{_VLLM}/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
    (
        f"{_VLLM}/v1/engine/core.py",
        498,
        "__init__",
        "super().__init__(vllm_config, executor_class, log_stats,",
    ),
    (f"{_VLLM}/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (f"{_VLLM}/executor/executor_base.py", 54, "__init__", "self._init_executor()"),
]
_WAIT_FRAMES: list[_Frame] = [
    (
        f"{_VLLM}/v1/executor/multiproc_executor.py",
        106,
        "_init_executor",
        "self.workers = WorkerProc.wait_for_ready(unready_workers)",
    ),
    (f"{_VLLM}/v1/executor/multiproc_executor.py", 509, "wait_for_ready", "raise e from None"),
]
_KV_FRAMES: list[_Frame] = [
    (f"{_VLLM}/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
    (f"{_VLLM}/v1/engine/core.py", 199, "_initialize_kv_caches", "kv_cache_configs = get_kv_cache_configs("),
    (f"{_VLLM}/v1/core/kv_cache_utils.py", 700, "check_enough_kv_cache_memory", "raise ValueError("),
]
_API_FRAMES: list[_Frame] = [
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (f"{_VLLM}/entrypoints/cli/main.py", 54, "main", "args.dispatch_function(args)"),
    (f"{_VLLM}/entrypoints/cli/serve.py", 57, "cmd", "uvloop.run(run_server(args))"),
    (
        f"{_VLLM}/entrypoints/openai/api_server.py",
        1884,
        "run_server",
        "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
    ),
    (f"{_VLLM}/v1/engine/utils.py", 886, "wait_for_engine_startup", "raise RuntimeError("),
]
WORKER_FAILED = (
    "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause."
)
ENGINE_INIT_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)


def _frames(frames: list[_Frame]) -> list[str]:
    out = []
    for path, line, func, code in frames:
        out += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return out


def _logged(log: VllmLog, proc: Proc, source: str, lines: list[str]) -> None:
    for text in lines:
        log.line(proc, "ERROR", source, text)


def model_frames(model_type: str, moe: bool) -> list[_Frame]:
    """The model constructor chain down to the tensor that did not fit."""
    module = (
        model_type if model_type in ("qwen3_moe", "qwen2_moe", "deepseek_v2", "llama", "mixtral") else "llama"
    )
    path = f"{_VLLM}/model_executor/models/{module}.py"
    frames: list[_Frame] = [
        (path, 615, "__init__", "self.model = Model(vllm_config=vllm_config,"),
        (
            f"{_VLLM}/model_executor/models/utils.py",
            641,
            "make_layers",
            'maybe_offload_to_cpu(layer_fn(prefix=f"{prefix}.{idx}"))',
        ),
        (path, 371, "__init__", "self.mlp = SparseMoeBlock(" if moe else "self.mlp = MLP("),
    ]
    return frames + (_MOE_FRAMES if moe else _DENSE_FRAMES) + [_TORCH_FRAME]


def worker_oom(log: VllmLog, worker: Proc, oom_message: str, model_type: str, moe: bool) -> None:
    """A worker's `WorkerProc failed to start.` with the CUDA OOM from building the model."""
    body = [
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        *_frames(_WORKER_FRAMES + model_frames(model_type, moe)),
        oom_message,
    ]
    _logged(log, worker, "multiproc_executor.py:597", body)


def engine_core_failed(log: VllmLog, core: Proc, cause: list[str], frames: list[_Frame]) -> None:
    """`EngineCore failed to start.`, its traceback ending in `cause`, then the process's own exit."""
    body = [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        *_frames(_CORE_FRAMES + frames),
        *cause,
    ]
    _logged(log, core, "core.py:708", body)
    log.raw(core, f"Process {core.name}:")
    log.raw(core, "Traceback (most recent call last):")
    for text in _frames(
        [("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()")]
    ):
        log.raw(core, text)
    log.raw(core, cause[-1])


def workers_failed(log: VllmLog, core: Proc) -> None:
    """The engine core's view when a worker died while the model was built."""
    engine_core_failed(log, core, [WORKER_FAILED], _WAIT_FRAMES)


def core_oom(log: VllmLog, core: Proc, oom_message: str, model_type: str, moe: bool) -> None:
    """A one-GPU engine core that runs the model itself and ran out of memory building it."""
    frames = [
        (f"{_VLLM}/v1/executor/uniproc_executor.py", 55, "_init_executor", "self.driver_worker.load_model()")
    ]
    engine_core_failed(log, core, [oom_message], frames + _WORKER_FRAMES[2:] + model_frames(model_type, moe))


def no_cache_blocks(log: VllmLog, core: Proc) -> None:
    """The KV cache gets no memory at all under --gpu-memory-utilization."""
    engine_core_failed(
        log,
        core,
        [
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        ],
        _KV_FRAMES,
    )


def kv_below_max_len(
    log: VllmLog, core: Proc, max_len: int, need_gib: float, have_gib: float, fits_tokens: int
) -> None:
    """The KV cache cannot hold one request of max-model-len."""
    message = (
        f"ValueError: To serve at least one request with the models's max seq len ({max_len}), "
        f"({need_gib:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({have_gib:.2f} GiB). Based on the available memory, the estimated maximum model length is "
        f"{fits_tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    engine_core_failed(log, core, [message], _KV_FRAMES)


def memory_in_use(
    log: VllmLog, core: Proc, worker: Proc, free_gib: float, total_gib: float, utilization: float
) -> None:
    """Free memory at start-up is below what --gpu-memory-utilization asks for (another process holds it)."""
    message = (
        f"ValueError: Free memory on device ({free_gib:.2f}/{total_gib:.2f} GiB) on startup is less "
        f"than desired GPU memory utilization ({utilization}, {utilization * total_gib:.2f} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    frames = [(f"{_VLLM}/v1/worker/gpu_worker.py", 196, "init_device", "raise ValueError(")]
    _logged(
        log,
        worker,
        "multiproc_executor.py:597",
        [
            "WorkerProc failed to start.",
            "Traceback (most recent call last):",
            *_frames(_WORKER_FRAMES[:1] + frames),
            message,
        ],
    )
    workers_failed(log, core)


def api_server_exit(log: VllmLog) -> None:
    """The API server's traceback once the engine core is gone."""
    log.raw(log.api, "Traceback (most recent call last):")
    for text in _frames(_API_FRAMES):
        log.raw(log.api, text)
    log.raw(log.api, ENGINE_INIT_FAILED)


def engine_core_died(log: VllmLog, core: Proc) -> None:
    """The engine core dies while serving: its fatal error, then the API server's EngineDeadError."""
    log.line(core, "ERROR", "core.py:717", "EngineCore encountered a fatal error.")
    _logged(
        log,
        core,
        "core.py:717",
        [
            "Traceback (most recent call last):",
            *_frames(
                [
                    (f"{_VLLM}/v1/engine/core.py", 708, "run_engine_core", "engine_core.run_busy_loop()"),
                    (f"{_VLLM}/v1/engine/core.py", 735, "run_busy_loop", "self._process_engine_step()"),
                ]
            ),
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ],
    )
    log.line(log.api, "ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.")
    log.raw(
        log.api,
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.",
    )


def port_in_use(log: VllmLog, host: str, port: int) -> None:
    """vLLM binds its socket before starting the engine: a taken port ends it at once."""
    log.raw(log.api, "Traceback (most recent call last):")
    for text in _frames(_API_FRAMES[:4]):
        log.raw(log.api, text)
    log.raw(log.api, f"OSError: [Errno 98] Address already in use: ('{host}', {port})")
