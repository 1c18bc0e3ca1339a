"""The failure texts a real vLLM 0.32 server writes, with this run's true figures filled in.

A worker that fails while the model is built logs `WorkerProc failed to start.` and its traceback; the
engine core then logs `EngineCore failed to start.` (its own traceback ends in the workers' summary);
the API server's last words are `RuntimeError: Engine core initialization failed. See root cause above.`
Logged tracebacks carry their process's prefix and logger header; what a process prints at exit
(`Process EngineCore:` and its traceback, the API server's traceback) is bare, as in the real journal
(tests/fixtures/vllm-real/).
"""

from __future__ import annotations

from console.sim.vllm.logfmt import Proc, VllmLog
from console.sim.vllm.tracebacks import (
    API_FRAMES,
    CORE_FRAMES,
    ENGINE_STARTUP_FRAMES,
    ENTRY,
    KV_FRAMES,
    MODEL_CONFIG_FRAMES,
    VLLM,
    WAIT_FRAMES,
    WORKER_FRAMES,
    Frame,
    frames,
    model_frames,
)

WORKER_FAILED = (
    "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause."
)
ENGINE_INIT_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)


def _logged(log: VllmLog, proc: Proc, source: str, lines: list[str]) -> None:
    for text in lines:
        log.line(proc, "ERROR", source, text)


def worker_oom(log: VllmLog, worker: Proc, oom_message: str, model_type: str, moe: bool) -> None:
    """A worker's `WorkerProc failed to start.` with the CUDA OOM from building the model."""
    body = [
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        *frames(WORKER_FRAMES + model_frames(model_type, moe)),
        oom_message,
    ]
    _logged(log, worker, "multiproc_executor.py:833", body)


def engine_core_failed(log: VllmLog, core: Proc, cause: list[str], stack: list[Frame]) -> None:
    """`EngineCore failed to start.`, its traceback ending in `cause`, then the process's own exit."""
    body = [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        *frames(CORE_FRAMES + stack),
        *cause,
    ]
    _logged(log, core, "core.py:1510", body)
    log.raw(None, f"Process {core.name}:")
    log.raw(None, "Traceback (most recent call last):")
    for text in frames(
        [("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()")]
    ):
        log.raw(None, text)
    log.raw(None, cause[-1])


def workers_failed(log: VllmLog, core: Proc) -> None:
    """The engine core's view when a worker died while the model was built."""
    engine_core_failed(log, core, [WORKER_FAILED], WAIT_FRAMES)


def no_cache_blocks(log: VllmLog, core: Proc) -> None:
    """The KV cache gets no memory at all under --gpu-memory-utilization."""
    engine_core_failed(
        log,
        core,
        [
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        ],
        KV_FRAMES,
    )


def kv_below_max_len(
    log: VllmLog, core: Proc, max_len: int, need_gib: float, have_gib: float, fits_tokens: int
) -> None:
    """The KV cache cannot hold one request of max-model-len."""
    message = (
        f"ValueError: To serve at least one request with the model's max seq len ({max_len}), "
        f"({round(need_gib, 2)} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({round(have_gib, 2)} GiB). Based on the available memory, the estimated maximum model length is "
        f"{fits_tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for "
        "more details."
    )
    engine_core_failed(log, core, [message], KV_FRAMES)


def memory_in_use(log: VllmLog, worker: Proc, free_gib: float, total_gib: float, utilization: float) -> None:
    """Free memory at start-up is below what --gpu-memory-utilization asks for (another process holds it): the
    worker's failure (the engine core's `workers_failed` follows)."""
    message = (
        f"ValueError: Free memory on device ({free_gib:.2f}/{total_gib:.2f} GiB) on startup is less "
        f"than desired GPU memory utilization ({utilization}, {utilization * total_gib:.2f} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    stack = [(f"{VLLM}/v1/worker/gpu_worker.py", 196, "init_device", "raise ValueError(")]
    _logged(
        log,
        worker,
        "multiproc_executor.py:833",
        [
            "WorkerProc failed to start.",
            "Traceback (most recent call last):",
            *frames(WORKER_FRAMES[:1] + stack),
            message,
        ],
    )


def api_server_exit(log: VllmLog) -> None:
    """The API server's bare traceback once the engine core is gone."""
    log.raw(None, "Traceback (most recent call last):")
    for text in frames(API_FRAMES + ENGINE_STARTUP_FRAMES):
        log.raw(None, text)
    log.raw(None, ENGINE_INIT_FAILED)


def banner(model: str) -> list[str]:
    """vLLM 0.32's start-up banner, one logger line each."""
    from console.sim.vllm.args import VLLM_VERSION

    return [
        "",
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VLLM_VERSION}",
        f"  █▄█▀ █     █     █     █  model   {model}",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        "",
    ]


def max_model_len_too_long(log: VllmLog, requested: int, derived: int) -> None:
    """`--max-model-len` beyond the model's positions: pydantic refuses the ModelConfig, nothing starts."""
    log.raw(None, "Traceback (most recent call last):")
    for text in frames(API_FRAMES + MODEL_CONFIG_FRAMES):
        log.raw(None, text)
    log.raw(None, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig")
    log.raw(
        None,
        f"  Value error, User-specified max_model_len ({requested}) is greater than the derived "
        f"max_model_len (max_position_embeddings={float(derived)} or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
        "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
        "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
        "array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]",
    )
    log.raw(None, "    For further information visit https://errors.pydantic.dev/2.14/v/value_error")


def engine_core_died(log: VllmLog, core: Proc) -> None:
    """The engine core process dies while serving (a kill, a crash): the API server's 0.32 lines."""
    log.info(log.api, "utils.py:628", f"[shutdown] Process manager: send sigterm to process {core.name}")
    log.line(
        log.api,
        "WARNING",
        "core_client.py:817",
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
    )
    for step in ("start timeout=default", "stopping engine manager", "engine manager stopped",
                 "cleaning up background resources", "complete"):  # fmt: skip
        log.info(log.api, "core_client.py:770", f"[shutdown] MPClient: {step}")
    output_handler_failed(log)


def output_handler_failed(log: VllmLog) -> None:
    """The API server's output handler once its engine core is gone, after a death or a requested stop."""
    _logged(
        log,
        log.api,
        "async_llm.py:906",
        [
            "AsyncLLM output_handler failed.",
            "Traceback (most recent call last):",
            *frames(
                [
                    (f"{VLLM}/v1/engine/async_llm.py", 849, "output_handler",
                     "outputs = await engine_core.get_output_async()"),
                    (f"{VLLM}/v1/engine/core_client.py", 1235, "get_output_async",
                     "raise self._format_exception(outputs) from None"),
                ]
            ),  # fmt: skip
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
            "trace (above) for the root cause.",
        ],
    )


def port_in_use(log: VllmLog, host: str, port: int) -> None:
    """vLLM binds its socket before starting the engine: a taken port ends it at once."""
    log.raw(None, "Traceback (most recent call last):")
    stack = API_FRAMES[:3] + [
        (ENTRY, 170, "run_server", "listen_address, sock = setup_server(args)"),
        (ENTRY, 121, "setup_server", "sock = create_server_socket(sock_addr)"),
        (f"{VLLM}/entrypoints/utils.py", 92, "create_server_socket", "sock.bind(addr)"),
    ]
    for text in frames(stack):
        log.raw(None, text)
    log.raw(None, "OSError: [Errno 98] Address already in use")
