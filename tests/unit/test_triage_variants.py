"""Triage on the variants real logs use for known causes: a cause in a traceback's opening line,
frames that lost their indent, a traceback cut off before its exception, a message without its
exception's name, a port taken before binding, and a bare `Killed` that ends a failure already named."""

from __future__ import annotations

import pytest

from console.domain.triage.root_cause import decisive
from console.domain.triage.triager import Triager, classify_line, triage_lines
from console.domain.values import Finding, FindingClass

C = FindingClass
_CAPTURE_FRAMES = [
    '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 212, in capture',
    "    ) = self.capture_one_batch_size(bs, forward)",
    '  File "/x/sglang/srt/layers/attention/flashinfer_backend.py", line 452, in call_begin_forward',
    "    wrapper.begin_forward(",
]


def _decisive(lines: list[str]) -> Finding | None:
    return decisive(triage_lines(lines))


@pytest.mark.parametrize(
    "line",
    [
        "torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed "
        "during CUDA graph capture. If you need this call to be captured, please file an issue. Current "
        "cudaStreamCaptureStatus: cudaStreamCaptureStatusActive",
        "RuntimeError: CUDA error: operation failed due to a previous error during capture",
        "RuntimeError: Cannot call CUDAGeneratorImpl::seed during CUDA graph capture.",
    ],
)
def test_an_error_raised_during_capture_is_a_cuda_graph_failure(line: str):
    f = classify_line(line)
    assert f is not None and f.cls is C.CUDA_GRAPH and f.fatal


def test_a_traceback_cut_off_inside_a_capture_is_a_cuda_graph_failure():
    lines = [
        "[2024-10-22 06:31:49 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "[2024-10-22 06:31:49 TP0] Traceback (most recent call last):",
        *_CAPTURE_FRAMES,
    ]
    f = _decisive(lines)
    assert f is not None and f.cls is C.CUDA_GRAPH and f.fatal and f.rank == "TP0"
    assert "cut off" in f.summary and "call_begin_forward" in f.summary


def test_a_traceback_cut_off_in_the_weight_loader_is_a_weight_load_error():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/models/qwen3.py", line 493, in load_weights',
        "    param = params_dict[name]",
    ]
    f = _decisive(lines)
    assert f is not None and f.cls is C.WEIGHT_LOAD_ERROR and f.fatal


def test_a_cut_off_traceback_that_ended_the_process_is_an_engine_error():
    f = _decisive(["Traceback (most recent call last):", '  File "/x/main.py", line 3, in main', "    run()"])
    assert f is not None and f.cls is C.ENGINE_ERROR and "cut off" in f.summary


@pytest.mark.parametrize(
    "opening",
    [
        "ERROR 08-23 08:25:25 [utils.py:1] Exception in ASGI application: Traceback (most recent call last):",
        "WARNING 08-23 08:25:25 [utils.py:1] Traceback (most recent call last):",
    ],
)
def test_a_cut_off_traceback_that_was_handled_or_a_warning_stays_quiet(opening: str):
    assert _decisive([opening, *_CAPTURE_FRAMES]) is None


def test_a_traceback_cut_off_long_before_the_end_names_nothing():
    lines = ["Traceback (most recent call last):", *_CAPTURE_FRAMES] + ["INFO: serving"] * 100
    assert _decisive(lines) is None


def test_the_cause_on_a_tracebacks_opening_line_is_reported_at_once():
    prefix = "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] "
    triager = Triager()
    found = triager.feed(
        prefix + "Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), Traceback (most recent call last):"
    )
    assert [f.cls for f in found] == [C.NCCL] and found[0].fatal
    assert found[0].summary == "NCCL error: unhandled system error"
    triager.feed(prefix + '  File "/x/vllm/worker/worker.py", line 132, in init_device')
    assert triager.finish() == []  # the cut-off traceback is the same failure, already named
    assert triager.decisive().cls is C.NCCL


def test_a_handled_opening_line_is_not_a_finding():
    line = "ERROR [x.py:1] Exception in ASGI application: NCCL error: internal error, Traceback (most recent call last):"
    assert Triager().feed(line) == []


@pytest.mark.parametrize(
    ("frame_indent", "error"),
    [("", "KeyError: 'midlayer.self_attn.qkv_proj.weight'"), ("  ", "AssertionError: shape (4096,) != (2048,)")],
)
def test_an_exception_raised_in_load_weights_is_a_weight_load_error(frame_indent: str, error: str):
    lines = [
        f'{frame_indent}File "/x/sglang/srt/model_loader/loader.py", line 445, in load_weights_and_postprocess',
        "    model.load_weights(weights)",
        f'{frame_indent}File "/x/sglang/srt/models/qwen3.py", line 493, in load_weights',
        "    param = params_dict[name]",
        "            ~~~~~~~~~~~^^^^^^",
        error,
    ]
    f = _decisive(lines)
    assert f is not None and f.cls is C.WEIGHT_LOAD_ERROR and f.fatal
    assert error in f.summary


def test_an_exception_raised_in_the_safetensors_iterator_is_a_weight_load_error():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/model_loader/weight_utils.py", line 420, in safetensors_weights_iterator',
        "    with safe_open(st_file, framework=\"pt\") as f:",
        "RuntimeError: unexpected EOF",
    ]
    f = _decisive(lines)
    assert f is not None and f.cls is C.WEIGHT_LOAD_ERROR and f.summary.endswith("RuntimeError: unexpected EOF")


def test_kv_cache_message_without_its_exception_name_is_named():
    f = classify_line(
        "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
        "cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
        "the engine."
    )
    assert f is not None and f.cls is C.KV_CACHE_TOO_SMALL and f.fatal
    assert f.summary == "KV cache too small for the max model length 29000; the KV cache holds 23648 tokens"


@pytest.mark.parametrize(
    ("line", "summary"),
    [
        ("ValueError: metrics_port at 40290 is not available in 30 seconds. metrics_port is used by a process "
         "already. process.name()='sglang'", "Port 40290 (metrics_port) is already in use by another process"),
        ("RuntimeError: Port 30000 is already in use", "Port 30000 is already in use by another process"),
        ("ValueError: nccl_port at 29500 is not available in 30 seconds.",
         "Port 29500 (nccl_port) is already in use by another process"),
    ],
)
def test_a_port_taken_before_binding_is_port_in_use(line: str, summary: str):
    f = classify_line(line)
    assert f is not None and f.cls is C.PORT_IN_USE and f.fatal and f.summary == summary


@pytest.mark.parametrize(
    "line",
    [
        "[2024-12-13 01:44:59] WARNING port=30000 is used by a process already. process.name()='python'",
        "ValueError: the tokenizer is not available in offline mode",
        "RuntimeError: the device is already in use by another context",
    ],
)
def test_availability_words_about_other_things_are_not_port_in_use(line: str):
    f = classify_line(line)
    assert f is None or f.cls is not C.PORT_IN_USE


def test_a_bare_killed_after_a_named_failure_is_its_end_not_a_host_oom():
    lines = [
        "[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):",
        '  File "/home/sglang/python/sglang/srt/server.py", line 621, in _wait_and_warmup',
        '    assert res.status_code == 200, f"{res=}, {res.text=}"',
        "AssertionError: res=<Response [502]>, res.text=''",
        "",
        "Killed",
    ]
    f = _decisive(lines)
    assert f is not None and f.cls is C.ENGINE_ERROR and f.summary.startswith("AssertionError: res=<Response [502]>")
    assert C.HOST_OOM in {c.cls for c in f.consequences}


def test_a_bare_killed_alone_is_still_a_host_oom():
    f = _decisive(["Loading safetensors checkpoint shards:  40% Completed | 2/5", "Killed"])
    assert f is not None and f.cls is C.HOST_OOM


@pytest.mark.parametrize(
    ("line", "cls", "words"),
    [
        ("torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)",
         C.CUDA_OOM, "CUDA OOM"),
        ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you "
         "tried to allocate 123 bytes.", C.HOST_OOM, "Host RAM"),
        ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
         "address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
         C.PORT_IN_USE, "Port 29500"),
        ("To serve at least one request with the model's max seq len (131072), (8.00 GiB KV cache is needed, which "
         "is larger than the available KV cache memory (2.41 GiB).", C.KV_CACHE_TOO_SMALL, "needs 8.00 GiB"),
        ("Exception: Capture CUDA graph failed: CUDA error: invalid argument", C.CUDA_GRAPH, "invalid argument"),
        ("RuntimeError: NCCL Error 2: unhandled system error", C.NCCL, "unhandled system error"),
        ("RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
         "store by key '0', but store->get('0') got error: Connection reset by peer", C.NCCL,
         "set-up failed: Connection reset by peer"),
        ("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
         C.MEMORY_IN_USE, "unbalanced"),
        ("AssertionError: Error in memory profiling. Initial free memory 70.2 GiB, current free memory 75.0 GiB.",
         C.MEMORY_IN_USE, "profiled"),
        ("ValueError: Following weights were not initialized from checkpoint: {'lm_head.weight'}",
         C.WEIGHT_LOAD_ERROR, "lm_head.weight"),
    ],
)
def test_known_causes_in_other_words(line: str, cls: FindingClass, words: str):
    f = classify_line(line)
    assert f is not None and f.cls is cls and f.fatal and words in f.summary


def test_an_unnamed_exception_raised_in_a_capture_is_a_cuda_graph_failure():
    lines = ["[2024-10-22 06:31:49 TP0] Traceback (most recent call last):", *_CAPTURE_FRAMES,
             "RuntimeError: BatchDecodeWithPagedKVCache failed with error code invalid argument"]
    f = _decisive(lines)
    assert f is not None and f.cls is C.CUDA_GRAPH and f.fatal
    assert f.summary == "CUDA graph capture failed: RuntimeError: BatchDecodeWithPagedKVCache failed with error " \
                        "code invalid argument"


def test_a_timestamped_chained_exception_is_not_read_as_a_syslog_line():
    line = ("2025-10-14T23:59:26.998006749Z torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call "
            "CUDAGeneratorImpl::current_seed during CUDA graph capture.")
    f = classify_line(line)
    assert f is not None and f.cls is C.CUDA_GRAPH
    assert "InternalTorchDynamoError" in Triager().feed(line)[0].line


def test_a_wrapped_frame_keeps_its_traceback_and_what_it_names():
    # The rest of a wrapped frame that holds a gate ("rror") reaches the traceback: it is no message.
    frame = '  File "/opt/miniconda/envs/sglang/lib/python3.12/site-packages/sglang/srt/models/qwen3.py", line 493, in load_we'
    lines = ["Traceback (most recent call last):", frame, "ights_with_error_check", "    param = params_dict[name]",
             "KeyError: 'midlayer.self_attn.qkv_proj.weight'"]
    f = _decisive(lines)
    assert f is not None and f.cls is C.WEIGHT_LOAD_ERROR and f.fatal
