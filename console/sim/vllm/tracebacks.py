"""Where in vLLM 0.32 (and PyTorch) a failure is raised: the frames of the simulated tracebacks.

Paths, line numbers, functions and source lines as a real vLLM 0.32 prints them
(tests/fixtures/vllm-real/*.log); `frames()` writes them as Python does, two lines a frame.
"""

from __future__ import annotations

from console.sim.logfmt import SITE

VLLM = f"{SITE}/vllm"
Frame = tuple[str, int, str, str]

WORKER_FRAMES: list[Frame] = [
    (
        f"{VLLM}/v1/executor/multiproc_executor.py",
        571,
        "worker_main",
        "worker = WorkerProc(*args, **kwargs)",
    ),
    (f"{VLLM}/v1/executor/multiproc_executor.py", 437, "__init__", "self.worker.load_model()"),
    (
        f"{VLLM}/v1/worker/gpu_worker.py",
        213,
        "load_model",
        "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
    ),
    (f"{VLLM}/v1/worker/gpu_model_runner.py", 2602, "load_model", "self.model = model_loader.load_model("),
    (
        f"{VLLM}/model_executor/model_loader/base_loader.py",
        45,
        "load_model",
        "model = initialize_model(vllm_config=vllm_config,",
    ),
    (
        f"{VLLM}/model_executor/model_loader/utils.py",
        63,
        "initialize_model",
        "return model_class(vllm_config=vllm_config, prefix=prefix)",
    ),
]
MOE_FRAMES: list[Frame] = [
    (
        f"{VLLM}/model_executor/layers/fused_moe/layer.py",
        1180,
        "__init__",
        "self.quant_method.create_weights(layer=self, **moe_quant_params)",
    ),
    (
        f"{VLLM}/model_executor/layers/quantization/fp8.py",
        623,
        "create_weights",
        "w13_weight = torch.nn.Parameter(torch.empty(",
    ),
]
DENSE_FRAMES: list[Frame] = [
    (f"{VLLM}/model_executor/layers/linear.py", 431, "__init__", "self.quant_method.create_weights("),
    (f"{VLLM}/model_executor/layers/linear.py", 205, "create_weights", "weight = Parameter(torch.empty("),
]
TORCH_FRAME: Frame = (
    f"{SITE}/torch/utils/_device.py",
    104,
    "__torch_function__",
    "return func(*args, **kwargs)",
)
CORE_FRAMES: list[Frame] = [
    (
        f"{VLLM}/v1/engine/core.py",
        1482,
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    ),
    (f"{VLLM}/v1/engine/core.py", 1194, "__init__", "super().__init__("),
    (f"{VLLM}/v1/engine/core.py", 119, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (f"{VLLM}/v1/executor/abstract.py", 104, "__init__", "self._init_executor()"),
]
WAIT_FRAMES: list[Frame] = [
    (
        f"{VLLM}/v1/executor/multiproc_executor.py",
        106,
        "_init_executor",
        "self.workers = WorkerProc.wait_for_ready(unready_workers)",
    ),
    (f"{VLLM}/v1/executor/multiproc_executor.py", 509, "wait_for_ready", "raise e from None"),
]
KV_FRAMES: list[Frame] = [
    (f"{VLLM}/v1/engine/core.py", 157, "__init__", "kv_cache_config = self._initialize_kv_caches(vllm_config)"),
    (f"{VLLM}/v1/engine/core.py", 326, "_initialize_kv_caches", "kv_cache_configs = get_kv_cache_configs("),
    (f"{VLLM}/v1/core/kv_cache_utils.py", 2642, "get_kv_cache_configs", "_check_enough_kv_cache_memory("),
    (f"{VLLM}/v1/core/kv_cache_utils.py", 1030, "_check_enough_kv_cache_memory", "raise ValueError("),
]
ENTRY = f"{VLLM}/entrypoints/launchers/api_server/entry.py"
API_FRAMES: list[Frame] = [
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (f"{VLLM}/entrypoints/cli/main.py", 120, "main", "args.dispatch_function(args)"),
    (f"{VLLM}/entrypoints/cli/serve.py", 156, "cmd", "uvloop.run(run_server(args))"),
    (ENTRY, 177, "run_server", "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
    (ENTRY, 195, "run_server_worker", "async with build_async_engine_client("),
    (ENTRY, 61, "build_async_engine_client", "async with build_async_engine_client_from_engine_args("),
]
ENGINE_STARTUP_FRAMES: list[Frame] = [
    (f"{VLLM}/v1/engine/utils.py", 1351, "launch_core_engines", "wait_for_engine_startup("),
    (f"{VLLM}/v1/engine/utils.py", 1431, "wait_for_engine_startup", "raise RuntimeError("),
]
MODEL_CONFIG_FRAMES: list[Frame] = [
    (
        ENTRY,
        83,
        "build_async_engine_client_from_engine_args",
        "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
    ),
    (f"{VLLM}/engine/arg_utils.py", 2240, "create_engine_config", "model_config = self.create_model_config()"),
    (f"{VLLM}/engine/arg_utils.py", 1955, "create_model_config", "return ModelConfig("),
]


def frames(stack: list[Frame]) -> list[str]:
    """A traceback's frame lines, two per frame, as Python prints them."""
    out = []
    for path, line, func, code in stack:
        out += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return out


def model_frames(model_type: str, moe: bool) -> list[Frame]:
    """The model constructor chain down to the tensor that did not fit."""
    module = (
        model_type if model_type in ("qwen3_moe", "qwen2_moe", "deepseek_v2", "llama", "mixtral") else "llama"
    )
    path = f"{VLLM}/model_executor/models/{module}.py"
    frames: list[Frame] = [
        (path, 615, "__init__", "self.model = Model(vllm_config=vllm_config,"),
        (
            f"{VLLM}/model_executor/models/utils.py",
            641,
            "make_layers",
            'maybe_offload_to_cpu(layer_fn(prefix=f"{prefix}.{idx}"))',
        ),
        (path, 371, "__init__", "self.mlp = SparseMoeBlock(" if moe else "self.mlp = MLP("),
    ]
    return frames + (MOE_FRAMES if moe else DENSE_FRAMES) + [TORCH_FRAME]
