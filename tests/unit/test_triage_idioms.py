"""Triage on engine idioms that say the cause in words no exception carries: SGLang's capture-failure
advice, torch.distributed's EADDRINUSE, vLLM's zero GPU blocks, a traceback through the engine's own
main loop, and a markdown bullet before a timestamp. The lines are real (tests/corpus/SOURCES.md)."""

from __future__ import annotations

from console.domain.triage.root_cause import decisive
from console.domain.triage.triager import classify_line, triage_lines
from console.domain.values import FindingClass

C = FindingClass


def test_sglang_capture_advice_alone_names_a_failed_capture():
    lines = [
        "3. disable torch compile by not using --enable-torch-compile",
        "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)",
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.CUDA_GRAPH and found.fatal


def test_the_capture_advice_does_not_hide_the_oom_that_caused_it():
    lines = [
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.25 MiB is free.",
        "4. disable cuda graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.CUDA_OOM and found.context is C.CUDA_GRAPH


def test_a_launch_command_with_the_flag_is_no_finding():
    assert classify_line("python -m sglang.launch_server --model-path x --disable-cuda-graph --port 30000") is None


def test_torch_store_eaddrinuse_is_a_port_in_use_with_its_port():
    line = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. port: 42173, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    found = classify_line(line)
    assert found is not None and found.cls is C.PORT_IN_USE and "42173" in found.summary


def test_torch_store_eaddrinuse_wrapped_mid_word_is_still_a_port_in_use():
    lines = [
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 42173, useIpv6: false, code: -98, name: EAD",
        "DRINUSE, message: address already in use",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.PORT_IN_USE


def test_zero_gpu_blocks_at_info_is_a_fatal_kv_cache_too_small():
    line = "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256"
    found = classify_line(line)
    assert found is not None and found.cls is C.KV_CACHE_TOO_SMALL and found.fatal


def test_some_gpu_blocks_are_no_finding():
    assert classify_line("INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0123, # CPU blocks: 256") is None
    assert classify_line("INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 2048, # CPU blocks: 0,") is None


def test_a_cut_traceback_through_the_engine_loop_ended_the_engine():
    frames = [
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 532, in run_engine_loop',
        "    has_requests_in_progress = await asyncio.wait_for(",
        '  File "/usr/lib/python3.10/asyncio/tasks.py", line 445, in wait_for',
        "    return fut.result()",
    ]
    found = decisive(triage_lines(frames))
    assert found is not None and found.cls is C.ENGINE_ERROR and found.fatal


def test_a_cut_traceback_elsewhere_with_no_opening_is_no_finding():
    frames = [
        '  File "/usr/lib/python3.10/asyncio/tasks.py", line 445, in wait_for',
        "    return fut.result()",
    ]
    assert decisive(triage_lines(frames)) is None


def test_a_markdown_bullet_before_a_timestamp_is_stripped():
    prefix = "> - 2024-06-22T20:16:34.700+00:00 ERROR 06-22 20:16:34 async_llm_engine.py:52] "
    frames = [
        prefix + '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 532, '
        "in run_engine_loop",
        prefix + "    has_requests_in_progress = await asyncio.wait_for(",
    ]
    found = decisive(triage_lines(frames))
    assert found is not None and found.cls is C.ENGINE_ERROR


def test_a_keyerror_naming_a_parameter_is_a_weight_load_error():
    found = classify_line("KeyError: 'layers.22.mlp.gate_up_proj.weight'")
    assert found is not None and found.cls is C.WEIGHT_LOAD_ERROR and "gate_up_proj" in found.summary


def test_a_keyerror_of_something_else_is_left_to_the_open_world():
    assert classify_line("KeyError: 'choices'") is None
    assert classify_line("KeyError: 'model_type'") is None


def test_a_traceback_headed_by_a_quoted_parameter_name_is_the_weight_loader():
    # vLLM's logger.exception(e) of a KeyError prints str(e), the quoted key, then a traceback cut short.
    lines = [
        "ERROR 12-09 00:49:29 engine.py:366] 'layers.0.mlp.down_proj.weight.absmax'",
        "ERROR 12-09 00:49:29 engine.py:366] Traceback (most recent call last):",
        'ERROR 12-09 00:49:29 engine.py:366]   File "/vllm/engine/multiprocessing/engine.py", line 357, in run_mp_engine',
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.WEIGHT_LOAD_ERROR


def test_rays_memory_monitor_killing_workers_is_host_oom():
    line = ("Memory on the node (IP: 192.0.2.7, ID: 708c) where the task (actor ID: 0dab, name=RayWorkerVllm.__init__, "
            "pid=308, memory used=11.15GB) was running was 12.49GB / 13.15GB (0.950003), which exceeds the memory "
            "usage threshold of 0.95. Ray killed this worker")
    found = classify_line(line)
    assert found is not None and found.cls is C.HOST_OOM and found.fatal


def test_a_word_wrapped_rest_with_one_space_is_read():
    lines = ["(raylet) node_manager.cc:3007: 2 Workers (tasks /",
             " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons"]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.HOST_OOM


def test_a_ptxas_error_is_a_compile_error():
    line = ("ERROR 03-27 12:41:06 [core.py:344] ptxas /tmp/tmp6qa78v4o.ptx, line 661; error   : Modifier "
            "'.evict_last' cannot be combined with modifier '.cg'")
    found = classify_line(line)
    assert found is not None and found.cls is C.COMPILE_ERROR and found.fatal
    assert classify_line("ptxas info    : Used 128 registers, 384 bytes cmem[0]") is None


def test_an_nccl_warning_is_a_note_that_names_a_death_that_says_nothing():
    warn = ("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 192.0.2.4<56849> "
            "returned 113(No route to host) errno 115(Operation now in progress)")
    note = classify_line(warn)
    assert note is not None and note.cls is C.NCCL and not note.fatal
    cut = [
        "[2025-02-24 14:09:34 TP14] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker.py", line 68, in __init__',
        "    self.model_runner = ModelRunner(",
    ]
    found = decisive(triage_lines([warn, *cut]))
    assert found is not None and found.cls is C.NCCL and found.fatal
    assert decisive(triage_lines([warn])) is None  # a warning alone is no failure


def test_an_nccl_warning_does_not_override_a_named_exception():
    warn = "node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect returned 113(No route to host)"
    lines = [warn, "Traceback (most recent call last):", '  File "/a.py", line 1, in f', "ZeroDivisionError: division by zero"]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.ENGINE_ERROR


def test_an_elided_oom_still_gives_what_was_free():
    found = classify_line("tvm.error.InternalError: CUDA out of memory. Tried to allocate 73.65 GiB. GPU 1 ... "
                          "50.40 GiB is free.")
    assert found is not None and found.oom.free_bytes == round(50.40 * 2**30) and found.oom.total_bytes is None


def test_sglangs_piecewise_capture_failure_is_a_failed_capture():
    found = classify_line("[2026-05-14 20:48:43] Piecewise CUDA Graph failed with error: object of type 'NoneType' "
                          "has no len()")
    assert found is not None and found.cls is C.CUDA_GRAPH and "NoneType" in found.summary
    advice = classify_line("To work around this error, add --disable-piecewise-cuda-graph to your launch command.")
    assert advice is not None and advice.cls is C.CUDA_GRAPH
    assert classify_line("python -m sglang.launch_server --cuda-graph-max-bs 16 --port 30000") is None


def test_an_oom_in_nccls_own_allocation_is_the_cause_of_its_error():
    lines = [
        "gpu-node-1:2140:2140 [3] include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'",
        "RuntimeError: NCCL Error 1: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    ]
    found = decisive(triage_lines(lines))
    assert found is not None and found.cls is C.CUDA_OOM and found.fatal


def test_tritons_driver_oom_is_a_cuda_oom():
    found = classify_line("RuntimeError: Triton Error [CUDA]: out of memory")
    assert found is not None and found.cls is C.CUDA_OOM
