"""Triage on logs as the real world writes them: prefixes, wrapped lines, C++ aborts, classes named by
no signature, root causes over their consequences, and quiet where nothing is wrong."""

from __future__ import annotations

import pytest

from console.domain.triage.catalogue import CATALOGUE, hint_for
from console.domain.triage.root_cause import decisive
from console.domain.triage.triager import Triager, classify_line, triage_lines
from console.domain.values import Finding, FindingClass

C = FindingClass
GIB = 1 << 30
MIB = 1 << 20
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of "
    "23.57 GiB of which 605.88 MiB is free. Process 133288 has 22.97 GiB memory in use."
)


def _decisive(lines: list[str]) -> Finding | None:
    return decisive(triage_lines(lines))


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"[rank1]: {OOM}", "rank1"),
        (f"vllm-1  | (VllmWorkerProcess pid=760) ERROR 11-18 18:07:28 [engine.py:366] {OOM}", None),
        (f"(EngineCore_DP0 pid=316) {OOM}", "DP0"),
        (f"(Worker_TP1 pid=99) ERROR 05-26 00:05:33 [multiproc_executor.py:671] {OOM}", "TP1"),
        (f"python3[1234]: [2026-05-26 00:06:20 TP3] {OOM}", "TP3"),
        (f"2025-10-14T23:59:26.998006749Z (RayWorkerWrapper pid=5, ip=10.0.0.2) {OOM}", None),
        (f"2024-06-25 16:32:00,563 | ERROR    | vllm.worker:load:12 - {OOM}", None),
        (f">   | [2024-09-05T00:38:34Z] ERROR:    {OOM}", None),
        (f'<font color="#2AA1B3"><b>(Worker_TP2 pid=7)</b></font> {OOM}', "TP2"),
        (f"\x1b[36m(Worker_TP0 pid=7)\x1b[0m {OOM}", "TP0"),
        (f" [36m(Worker_TP0 pid=7) [0m {OOM}", "TP0"),
        (f"`{OOM}`", None),
    ],
)
def test_prefixes_are_stripped_and_their_rank_kept(line, rank):
    finding = classify_line(line)
    assert finding is not None and finding.cls is C.CUDA_OOM and finding.fatal, line
    assert finding.rank == rank
    assert (finding.oom.gpu, finding.oom.tried_bytes, finding.oom.free_bytes) == (1, 1868310774, 635311227)


def test_torchrun_rank_prefix_keeps_tracebacks_apart_and_reads_the_message():
    lines = []
    for rank in (0, 1):
        lines += [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "/x.py", line 1, in f']
    lines += ["[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered",
              "[rank0]: ValueError: bad shard"]
    found = triage_lines(lines)
    assert [(f.cls, f.rank) for f in found] == [(C.ILLEGAL_MEMORY_ACCESS, "rank1"), (C.ENGINE_ERROR, "rank0")]
    assert _decisive(lines).cls is C.ILLEGAL_MEMORY_ACCESS


def test_an_oom_wrapped_mid_word_is_rejoined_with_exact_figures():
    full = ("(EngineCore pid=7) ERROR 04-27 09:07:04 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 44.53 GiB of which 263.25 MiB is free.")
    cut = 120
    found = triage_lines([full[:cut], full[cut:], "INFO 04-27 09:07:05 [x.py:1] Killing local vLLM worker processes"])
    (oom,) = found
    assert oom.cls is C.CUDA_OOM
    assert (oom.oom.tried_bytes, oom.oom.total_bytes, oom.oom.free_bytes) == (
        round(1.5 * GIB), round(44.53 * GIB), round(263.25 * MIB))


def test_a_needle_wrapped_in_two_is_still_found():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x.py", line 1, in forward',
        "RuntimeError: CUDA error: an illegal memory access was encountered while running the decode ker",
        "nel for batch 17",
    ]
    lines[2], lines[3] = lines[2][:70], lines[2][70:] + lines[3]
    assert _decisive(lines).cls is C.ILLEGAL_MEMORY_ACCESS


def test_cpp_abort_is_read_from_its_indented_what_line():
    lines = [
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: CUDA error: "
        "an illegal memory access was encountered",
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call "
        "first):",
    ]
    d = _decisive(lines)
    assert d.cls is C.ILLEGAL_MEMORY_ACCESS and "NCCL watchdog" in d.summary


def test_cpp_abort_no_signature_names_is_an_engine_error():
    d = _decisive(["terminate called after throwing an instance of 'std::runtime_error'",
                   "  what():  unexpected tensor layout in fused kernel"])
    assert d.cls is C.ENGINE_ERROR and d.fatal
    assert "std::runtime_error" in d.summary and "unexpected tensor layout" in d.summary


@pytest.mark.parametrize(
    ("lines", "cls", "words"),
    [
        (["Fatal Python error: Aborted", "", "Current thread 0x00007f (most recent call first):",
          '  File "/x.py", line 3 in run'], C.ENGINE_ERROR, "Fatal Python error: Aborted"),
        (["Fatal Python error: Segmentation fault"], C.SEGFAULT, "Segmentation fault"),
        (["*** SIGSEGV received at time=1709021359 on cpu 44 ***"], C.SEGFAULT, "SIGSEGV"),
        (["ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 died, exit code: -6"],
         C.ENGINE_ERROR, "died, exit code -6"),
        (["Traceback (most recent call last):", '  File "/x.py", line 1, in <module>',
          "ValueError: Unknown flag --foo"], C.ENGINE_ERROR, "ValueError: Unknown flag --foo"),
        (["(EngineCore_DP0 pid=9) ERROR 05-26 00:05:34 [core.py:708] EngineCore failed to start."],
         C.ENGINE_INIT, "Engine initialisation failed"),
        (["RuntimeError: alloc_req_slots runs out of memory. Please set a smaller --max-running-requests."],
         C.ENGINE_ERROR, "alloc_req_slots runs out of memory"),
    ],
)
def test_a_fatal_end_no_signature_names_is_still_a_fatal_finding(lines, cls, words):
    d = _decisive(lines)
    assert d is not None and d.cls is cls and d.fatal and words in d.summary, d


def test_a_workers_exception_wins_over_the_engines_summary_and_systemd():
    lines = [
        "(Worker_TP0 pid=11) ERROR 05-26 00:05:33 [multiproc_executor.py:671] WorkerProc failed to start.",
        "(Worker_TP0 pid=11) ERROR 05-26 00:05:33 [multiproc_executor.py:671] Traceback (most recent call last):",
        '(Worker_TP0 pid=11) ERROR 05-26 00:05:33 [multiproc_executor.py:671]   File "/w.py", line 9, in init',
        "(Worker_TP0 pid=11) ERROR 05-26 00:05:33 [multiproc_executor.py:671] ZeroDivisionError: division by zero",
        "(EngineCore_DP0 pid=9) ERROR 05-26 00:05:34 [core.py:708] EngineCore failed to start.",
        "(APIServer pid=2) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore_DP0': 1}",
        "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    d = _decisive(lines)
    assert (d.cls, d.rank, d.summary) == (C.ENGINE_ERROR, "TP0", "ZeroDivisionError: division by zero")
    assert [c.cls for c in d.consequences] == [C.ENGINE_INIT, C.ENGINE_INIT, C.UNIT_FAILED]
    assert d.to_json()["consequences"][0]["class"] == "engine_init"


def test_an_oom_during_capture_is_the_oom_with_the_capture_as_context():
    lines = [
        "[2026-05-26 00:07:10 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 392, in capture',
        "    graph.capture_begin()",
        OOM,
    ]
    d = _decisive(lines)
    assert d.cls is C.CUDA_OOM and d.context is C.CUDA_GRAPH and d.oom.tried_bytes == 1868310774


def test_a_key_error_inside_load_weights_is_a_weight_load_error():
    lines = [
        'ERROR 12-05 20:24:46 engine.py:366]   File "/vllm/model_executor/models/qwen2.py", line 371, in load_weights',
        "ERROR 12-05 20:24:46 engine.py:366]     param = params_dict[name]",
        "ERROR 12-05 20:24:46 engine.py:366] KeyError: 'layers.0.mlp.down_proj.weight_scale'",
    ]
    d = _decisive(lines)
    assert d.cls is C.WEIGHT_LOAD_ERROR and "down_proj.weight_scale" in d.summary


@pytest.mark.parametrize(
    ("line", "cls", "words"),
    [
        ("ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: "
         "dict_keys([...])", C.UNSUPPORTED_ARCHITECTURE, "FooForCausalLM"),
        ("huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
         "https://huggingface.co/meta-llama/Llama-3.2-1B/resolve/main/config.json.", C.HF_ACCESS, "gated"),
        ("huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url: "
         "https://huggingface.co/api/models/nobody/nothing", C.HF_ACCESS, "not found"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device",
         C.NO_KERNEL_IMAGE, "no kernel image"),
        ("The quantization method awq is not supported for the current GPU. Minimum capability: 75. Current "
         "capability: 70.", C.QUANTIZATION_UNSUPPORTED, "needs compute capability 7.5, this GPU has 7.0"),
        ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
         "(shm).", C.SHM_EXHAUSTED, "shared memory"),
        ("Bus error (core dumped)", C.SHM_EXHAUSTED, "Bus error"),
        ("Killed", C.HOST_OOM, "OOM killer"),
        ("May 26 00:06:21 gpu-node-1 systemd[1]: vllm.service: A process of this unit has been killed by the OOM "
         "killer.", C.HOST_OOM, "OOM killer"),
        ("triton.compiler.errors.CompilationError: at 12:8: error: unsupported dtype", C.COMPILE_ERROR,
         "compilation failed"),
        ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
         C.CUDA_DRIVER_TOO_OLD, "driver too old"),
        ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", C.CUDA_DRIVER_TOO_OLD,
         "driver too old"),
        ("ValueError: User-specified max_model_len (131072) is greater than the derived max_model_len "
         "(max_position_embeddings=32768 or model_max_length=None in model's config.json).", C.MAX_MODEL_LEN,
         "131072 exceeds the model's maximum (max_position_embeddings=32768"),
        ("OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/tmp'", C.DISK_FULL,
         "Disk full"),
        ("k26.service: Failed to write the unit's output to the journal: [Errno 28] No space left on device; "
         "stopping the unit", C.DISK_FULL, "Disk full"),
        ("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", C.GPU_XID, "Xid 79"),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", C.GPU_XID, "ECC"),
        ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 "
         "milliseconds before timing out.", C.NCCL_TIMEOUT, "ALLREDUCE ran 600059 ms"),
        ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", C.NCCL,
         "unhandled system error"),
        ("RuntimeError: CUDA driver error: out of memory", C.CUDA_OOM, "no figures"),
        ("[2025-07-02 07:41:59 DP0 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use "
         "the profiled value instead.", C.KV_CACHE_TOO_SMALL, "-561981"),
    ],
)
def test_new_classes_and_known_classes_in_other_words(line, cls, words):
    finding = classify_line(line)
    assert finding is not None and finding.cls is cls and finding.fatal, line
    assert words.lower() in finding.summary.lower(), finding.summary
    assert finding.hint == (finding.hint and finding.hint) and finding.hint


@pytest.mark.parametrize(
    "line",
    [
        "(APIServer pid=1) WARNING 08-19 14:58:41 [x.py:1] CUDA out of memory error on a previous request; retrying",
        "WARNING 05-26 00:05:33 [x.py:1] Not enough memory for the prefix cache; it will be smaller",
        "[W526 01:22:01.5 CUDAAllocatorConfig.h:28] Warning: expandable_segments not supported on this platform",
        "UserWarning: torch.cuda.OutOfMemoryError is deprecated, use torch.OutOfMemoryError",
        "gpu-node-1:2140:2140 [3] NCCL INFO Call to bind failed: Address already in use",
        'INFO:     127.0.0.1:55504 - "GET /v1/models HTTP/1.1" 404 Not Found',
        'INFO:     127.0.0.1:55504 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
        "ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
        "[2025-11-30 11:18:06] Endpoint '/get_model_info' is deprecated and will be removed in a future version.",
        "[2026-05-26 00:04:10 TP0] max_total_tokens=131072 is larger than the profiled value 98304. Use the "
        "profiled value instead.",
        "(APIServer pid=1) INFO 05-26 00:06:20 [x.py:1] Aborted request chatcmpl-1234.",
    ],
)
def test_quiet_where_nothing_is_wrong(line):
    finding = classify_line(line)
    assert finding is None or not finding.fatal, finding


def test_a_traceback_logged_at_warning_level_is_quiet():
    lines = [
        "(APIServer pid=1) WARNING 05-26 00:05:33 [x.py:1] Traceback (most recent call last):",
        '(APIServer pid=1) WARNING 05-26 00:05:33 [x.py:1]   File "/a.py", line 1, in f',
        "(APIServer pid=1) WARNING 05-26 00:05:33 [x.py:1] ValueError: could not parse the tool call",
    ]
    assert decisive(triage_lines(lines)) is None


def test_a_request_error_of_a_running_server_is_quiet():
    lines = [
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/uvicorn/protocols/http/httptools_impl.py", line 401, in run_asgi',
        "ValueError: the prompt is too long",
        'INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
        'INFO:     127.0.0.1:2 - "POST /v1/completions HTTP/1.1" 200 OK',
    ]
    assert decisive(triage_lines(lines)) is None


def test_an_exception_the_log_does_not_end_on_is_no_fatal_finding():
    lines = ["(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1] Traceback (most recent call last):",
             '(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1]   File "/a.py", line 1, in f',
             "(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1] KeyError: 'x'"]
    lines += [f"(APIServer pid=2) INFO 05-26 00:06:{i % 60:02d} [loggers.py:1] Avg prompt throughput: 1.0 tokens/s"
              for i in range(100)]
    assert decisive(triage_lines(lines)) is None


def test_the_log_ending_on_an_exception_ended_with_it():
    triager = Triager()
    for line in ["Loading weights", "RuntimeError: something the engine did not expect"]:
        assert triager.feed(line) == []
    (end,) = triager.finish()
    assert end.cls is C.ENGINE_ERROR and end.fatal and end.summary == "RuntimeError: something the engine did not expect"
    assert triager.decisive().cls is C.ENGINE_ERROR


def test_every_class_has_a_catalogue_entry_with_a_hint():
    assert set(CATALOGUE) == set(FindingClass)
    assert all(entry.title and entry.hint for entry in CATALOGUE.values())
    finding = classify_line("torch.AcceleratorError: CUDA error: no kernel image is available for execution on "
                            "the device (arch sm_120)")
    assert finding.summary == "no kernel image: this build has no kernels for this GPU (sm_120)"
    assert finding.hint == "this build has no kernels for this GPU (sm_120); use a build for it"
    assert hint_for(C.CUDA_OOM) in classify_line(OOM).to_json()["hint"]
