"""Triage on engine idioms that say the cause in words no exception carries: SGLang's capture-failure
advice, torch.distributed's EADDRINUSE, vLLM's zero GPU blocks, a traceback through the engine's own
main loop, and a markdown bullet before a timestamp. The lines are real (tests/corpus/SOURCES.md)."""

from __future__ import annotations

from console.domain.decisive import decisive
from console.domain.models import FindingClass
from console.domain.triage import classify_line, triage_lines

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
