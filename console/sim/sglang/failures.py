"""The failure texts a real SGLang 0.5 server writes, with this run's true figures filled in.

Each function returns lines; the engine prints them and exits 1, as SGLang's launcher does once a
scheduler reports an exception (`Received sigquit from a child process`).
"""

from __future__ import annotations

import time

from console.sim.cluster import collective_timeout_lines
from console.sim.logfmt import SITE

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
_MODEL_RUNNER = f"{SITE}/sglang/srt/model_executor/model_runner.py"

# One traceback frame: file, line, function, the source line, and its caret line (if Python prints one).
_Frame = tuple[str, int, str, str, str | None]

_SCHEDULER_FRAMES = [
    (f"{SITE}/sglang/srt/managers/scheduler.py", 2906, "run_scheduler_process",
     "scheduler = Scheduler(", "            ^^^^^^^^^^"),
    (f"{SITE}/sglang/srt/managers/scheduler.py", 312, "__init__",
     "self.tp_worker = TpModelWorker(", "                 ^^^^^^^^^^^^^^"),
    (f"{SITE}/sglang/srt/managers/tp_worker.py", 82, "__init__",
     "self.model_runner = ModelRunner(", "                    ^^^^^^^^^^^^"),
    (_MODEL_RUNNER, 239, "__init__", "self.initialize(min_per_gpu_memory)", None),
]
_LOAD_FRAMES = [
    (_MODEL_RUNNER, 320, "initialize", "self.load_model()", None),
    (_MODEL_RUNNER, 745, "load_model", "self.model = get_model(", "             ^^^^^^^^^^"),
    (f"{SITE}/sglang/srt/model_loader/__init__.py", 28, "get_model",
     "return loader.load_model(", "       ^^^^^^^^^^^^^^^^^^"),
    (f"{SITE}/sglang/srt/model_loader/loader.py", 594, "load_model",
     "model = _initialize_model(", "        ^^^^^^^^^^^^^^^^^^"),
    (f"{SITE}/sglang/srt/model_loader/loader.py", 262, "_initialize_model",
     "return model_class(", "       ^^^^^^^^^^^^"),
]
_MOE_FRAMES = [
    (f"{SITE}/sglang/srt/layers/moe/fused_moe_triton/layer.py", 250, "__init__",
     "self.quant_method.create_weights(", None),
    (f"{SITE}/sglang/srt/layers/quantization/compressed_tensors/compressed_tensors_moe.py", 1046,
     "create_weights", "torch.empty(", None),
]
_DENSE_FRAMES = [
    (f"{SITE}/sglang/srt/layers/linear.py", 412, "__init__", "self.quant_method.create_weights(", None),
    (f"{SITE}/sglang/srt/layers/quantization/unquant.py", 118, "create_weights", "torch.empty(", None),
]
_TORCH_DEVICE_FRAME = (f"{SITE}/torch/utils/_device.py", 104, "__torch_function__",
                       "return func(*args, **kwargs)", "       ^^^^^^^^^^^^^^^^^^^^^")

# The model file and the layer constructor chain SGLang goes through, by model_type.
_MODEL_FILES = {
    "deepseek_v3": "deepseek_v2", "deepseek_v2": "deepseek_v2", "kimi_k2": "deepseek_v2",
    "kimi_k25": "deepseek_v2", "qwen3_moe": "qwen3_moe", "qwen2_moe": "qwen2_moe",
    "mixtral": "mixtral", "llama": "llama", "qwen3": "qwen3", "qwen2": "qwen2",
}

CUDA_GRAPH_SOLUTIONS = [
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
]


def _frames(frames: list[_Frame]) -> list[str]:
    out = []
    for path, line, func, code, carets in frames:
        out.append(f'  File "{path}", line {line}, in {func}')
        out.append(f"    {code}")
        if carets:
            out.append(f"    {carets}")
    return out


def _model_frames(model_type: str, moe: bool) -> list[_Frame]:
    module = _MODEL_FILES.get(model_type, "llama")
    path = f"{SITE}/sglang/srt/models/{module}.py"
    frames: list[_Frame] = [
        (path, 2813, "__init__", "self.model = DeepseekV2Model(" if module == "deepseek_v2"
         else "self.model = Model(", None),
        (path, 2601, "__init__", "self.layers, self.start_layer, self.end_layer = make_layers(", None),
        (f"{SITE}/sglang/srt/utils/common.py", 563, "make_layers", "+ [", None),
        (f"{SITE}/sglang/srt/utils/common.py", 564, "<listcomp>",
         "maybe_offload_to_cpu(layer_fn(idx=idx, prefix=add_prefix(idx, prefix)))", None),
        (path, 2315, "__init__", "self.mlp = DeepseekV2MoE(" if moe else "self.mlp = MLP(", None),
    ]
    if moe:
        frames.append((path, 405, "__init__", "self.experts = get_moe_impl_class(quant_config)(", None))
    return frames


def _scheduler_exception(rank_prefix: str, frames: list[_Frame], *message: str) -> list[str]:
    """A scheduler's traceback: its constructor chain, then `frames`, then the error `message` lines."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return [
        f"[{stamp}{rank_prefix}] Scheduler hit an exception: Traceback (most recent call last):",
        *_frames(_SCHEDULER_FRAMES + frames),
        *message,
        "",
    ]


def cuda_oom_lines(*, rank_prefix: str, message: str, model_type: str, moe_tensor: bool) -> list[str]:
    """The scheduler's traceback for a CUDA OOM (`message`, see cuda_oom_message) while weights are created."""
    tail = _MOE_FRAMES if moe_tensor else _DENSE_FRAMES
    frames = _LOAD_FRAMES + _model_frames(model_type, moe_tensor) + tail + [_TORCH_DEVICE_FRAME]
    return _scheduler_exception(rank_prefix, frames, message)


def kv_too_small_lines(rank_prefix: str) -> list[str]:
    """SGLang's error when the weights leave no room for the KV pool under --mem-fraction-static."""
    return _scheduler_exception(
        rank_prefix,
        [
            (_MODEL_RUNNER, 331, "initialize", "self.init_memory_pool(", None),
            (_MODEL_RUNNER, 1511, "init_memory_pool", "raise RuntimeError(", None),
        ],
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    )


def cuda_graph_lines(rank_prefix: str) -> list[str]:
    """SGLang's wrapped error when CUDA graph capture fails, with its possible solutions."""
    cause = "CUDA error: operation not permitted when stream is capturing"
    return _scheduler_exception(
        rank_prefix,
        [
            (_MODEL_RUNNER, 345, "initialize", "self.init_device_graphs()", None),
            (_MODEL_RUNNER, 1890, "init_device_graphs",
             "self.graph_runner = graph_runners[self.device](self)", None),
            (f"{SITE}/sglang/srt/model_executor/cuda_graph_runner.py", 392, "__init__",
             "raise Exception(", None),
        ],
        f"Exception: Capture cuda graph failed: {cause}",
        *CUDA_GRAPH_SOLUTIONS,
    )


def invalid_device_lines(rank_prefix: str) -> list[str]:
    """A scheduler asked for a CUDA device that is not there (too few GPUs, or CUDA_VISIBLE_DEVICES)."""
    return _scheduler_exception(
        rank_prefix,
        [
            (_MODEL_RUNNER, 316, "initialize", "min_per_gpu_memory = self.init_torch_distributed()", None),
            (_MODEL_RUNNER, 658, "init_torch_distributed",
             "torch.get_device_module(self.device).set_device(self.gpu_id)", None),
            (f"{SITE}/torch/cuda/__init__.py", 567, "set_device", "torch._C._cuda_setDevice(device)", None),
        ],
        "RuntimeError: CUDA error: invalid device ordinal",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
        "below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    )


def rendezvous_lines(rank_prefix: str, torch_frames: list[str], message: str) -> list[str]:
    """A scheduler whose init_process_group gave up on the rendezvous (`message`: torch's error)."""
    return _scheduler_exception(
        rank_prefix,
        [
            (_MODEL_RUNNER, 316, "initialize", "min_per_gpu_memory = self.init_torch_distributed()", None),
            (_MODEL_RUNNER, 679, "init_torch_distributed", "init_distributed_environment(", None),
            (f"{SITE}/sglang/srt/distributed/parallel_state.py", 1457, "init_distributed_environment",
             "torch.distributed.init_process_group(", None),
        ],
        *torch_frames,
        message,
    )


def watchdog_lines(rank_prefix: str, watchdog_timeout: object) -> list[str]:
    """A scheduler's watchdog once its running batch made no progress for --watchdog-timeout seconds
    (scheduler.py, watchdog_thread: it then signals the launcher with SIGQUIT)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return [f"[{stamp}{rank_prefix}] Watchdog timeout (self.watchdog_timeout={watchdog_timeout!r})"]


def nccl_watchdog_lines(rank: int, *, timeout_ms: int, ran_ms: int, seq: int = 1) -> list[str]:
    """What c10d's watchdog writes when a collective never completes on `rank`."""
    return collective_timeout_lines(rank, timeout_ms=timeout_ms, ran_ms=ran_ms, seq=seq)


def port_in_use_line(host: str, port: int) -> str:
    """uvicorn's bind error (SGLang binds only after loading, so this can come minutes in)."""
    return f"[Errno 98] error while attempting to bind on address ('{host}', {port}): address already in use"
