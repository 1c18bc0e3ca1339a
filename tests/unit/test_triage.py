"""Failure triage: every class of shared/facts/engines.md, OOM figures, ranks, traceback blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.domain.triage.oom import parse_oom
from console.domain.triage.signature_table import ALL_NEEDLES, GATES, SIGNATURES
from console.domain.triage.triager import Triager, classify_line, decisive, parse_rank, triage_lines
from console.domain.values import Finding, FindingClass

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
MIB = 1 << 20
GIB = 1 << 30

SEED_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. GPU 2 has a total capacity of "
    "94.97 GiB of which 136.94 MiB is free. Including non-PyTorch memory, this process has 94.83 GiB memory in "
    "use. Of the allocated memory 93.62 GiB is allocated by PyTorch, and 273.15 MiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def test_seed_oom_figures_in_bytes():
    finding = classify_line(SEED_OOM)
    assert finding is not None and finding.cls is FindingClass.CUDA_OOM and finding.fatal
    oom = finding.oom
    assert oom is not None
    assert oom.gpu == 2
    assert oom.tried_bytes == 672 * MIB
    assert oom.total_bytes == round(94.97 * GIB)
    assert oom.free_bytes == round(136.94 * MIB)
    assert oom.in_use_bytes == round(94.83 * GIB)
    assert oom.allocated_bytes == round(93.62 * GIB)
    assert oom.reserved_unallocated_bytes == round(273.15 * MIB)
    assert finding.summary == "CUDA OOM on GPU 2: tried 672.00 MiB with 136.94 MiB free of 94.97 GiB"


def test_oom_json_carries_the_figures():
    data = classify_line("[2026-05-26 00:06:20 TP2] " + SEED_OOM).to_json()
    assert data["class"] == "cuda_oom" and data["rank"] == "TP2"
    assert data["summary"] == "CUDA OOM on GPU 2 (TP2): tried 672.00 MiB with 136.94 MiB free of 94.97 GiB"
    assert (data["gpu"], data["tried_bytes"], data["free_bytes"]) == (2, 704643072, round(136.94 * MIB))
    assert data["total_bytes"] == round(94.97 * GIB) and data["in_use_bytes"] == round(94.83 * GIB)


@pytest.mark.parametrize(
    ("spelling", "conf"),
    [
        ("torch.cuda.OutOfMemoryError", "PYTORCH_CUDA_ALLOC_CONF"),
        ("torch.OutOfMemoryError", "PYTORCH_ALLOC_CONF"),
    ],
)
def test_oom_spellings_and_units(spelling, conf):
    line = (
        f"{spelling}: CUDA out of memory. Tried to allocate 512 bytes. GPU 0 has a total capacity of 1.50 TiB of "
        "which 20.00 KiB is free. Including non-PyTorch memory, this process has 15.75 GiB memory in use. Of the "
        f"allocated memory 15.10 GiB is allocated by PyTorch, and 1.00 KiB is reserved by PyTorch but unallocated. "
        f"If reserved but unallocated memory is large try setting {conf}=expandable_segments:True"
    )
    oom = classify_line(line).oom
    assert (oom.gpu, oom.tried_bytes, oom.free_bytes, oom.reserved_unallocated_bytes) == (0, 512, 20480, 1024)
    assert oom.total_bytes == round(1.5 * (1 << 40))


def test_other_processes_do_not_count_as_this_process():
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
        "79.19 GiB of which 1.06 GiB is free. Process 4242 has 40.00 GiB memory in use. Including non-PyTorch "
        "memory, this process has 38.12 GiB memory in use."
    )
    assert parse_oom(line).in_use_bytes == round(38.12 * GIB)


def test_old_pytorch_oom_format():
    line = (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.56 GiB already allocated; 3.44 MiB free; 14.77 GiB reserved in total by PyTorch)"
    )
    oom = classify_line(line).oom
    assert (oom.gpu, oom.tried_bytes, oom.free_bytes) == (0, 20 * MIB, round(3.44 * MIB))
    assert oom.reserved_unallocated_bytes == round(14.77 * GIB) - round(14.56 * GIB)


def test_oom_without_figures_is_still_an_oom():
    finding = classify_line("RuntimeError: CUDA error: out of memory")
    assert finding.cls is FindingClass.CUDA_OOM
    assert finding.oom.gpu is None and finding.oom.tried_bytes is None
    assert "no figures" in finding.summary


@pytest.mark.parametrize(
    ("line", "cls", "in_summary"),
    [
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
         FindingClass.KV_CACHE_TOO_SMALL, "--mem-fraction-static"),
        ("RuntimeError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88; "
         "the minimum workable value is 0.91", FindingClass.KV_CACHE_TOO_SMALL, "0.88 (minimum workable 0.91)"),
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
         "initializing the engine.", FindingClass.KV_CACHE_TOO_SMALL, "cache blocks"),
        ("ValueError: To serve at least one request with the models's max seq len (131072), (8.00 GiB KV cache is "
         "needed, which is larger than the available KV cache memory (2.41 GiB). Based on the available memory, the "
         "estimated maximum model length is 39424.", FindingClass.KV_CACHE_TOO_SMALL, "about 39424 tokens"),
        ("ValueError: Free memory on device (10.12/94.97 GiB) on startup is less than desired GPU memory "
         "utilization (0.9, 85.47 GiB).", FindingClass.MEMORY_IN_USE, "10.12 of 94.97 GiB free"),
        ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
         "{'EngineCore_DP0': 1}", FindingClass.ENGINE_INIT, "EngineCore_DP0"),
        ("[2026-05-26 00:09:01] Initialization failed. warmup error: Connection refused",
         FindingClass.ENGINE_INIT, "warm-up failed: Connection refused"),
        ("Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing",
         FindingClass.CUDA_GRAPH, "operation not permitted"),
        ("[rank2]:[E526 01:22:01.512340211 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective "
         "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran "
         "for 600044 milliseconds before timing out.", FindingClass.NCCL_TIMEOUT, "ALLGATHER ran 600044 ms"),
        ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
         "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
         FindingClass.NCCL, "NCCL error"),
        ("ncclUnhandledCudaError: Call to CUDA function failed.", FindingClass.NCCL, "ncclUnhandledCudaError"),
        ("[2026-05-26 00:08:52] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): "
         "address already in use", FindingClass.PORT_IN_USE, "Port 30000 on 0.0.0.0"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered",
         FindingClass.ILLEGAL_MEMORY_ACCESS, "illegal memory access"),
        ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
         FindingClass.WEIGHT_LOAD_ERROR, "unreadable"),
        ("FileNotFoundError: [Errno 2] No such file or directory: '/models/k2/model-00007-of-00064.safetensors'",
         FindingClass.WEIGHT_LOAD_ERROR, "model-00007-of-00064.safetensors"),
        ("RuntimeError: Error(s) in loading state_dict: size mismatch for lm_head.weight: copying a param with "
         "shape torch.Size([163840, 7168])", FindingClass.WEIGHT_LOAD_ERROR, "lm_head.weight"),
        ("AssertionError: Attempted to load weight (torch.Size([192, 7168])) into parameter "
         "(torch.Size([384, 7168]))", FindingClass.WEIGHT_LOAD_ERROR, "shape mismatch"),
        ("ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
         "block_n = 128.", FindingClass.WEIGHT_LOAD_ERROR, "quantization block"),
        ("May 26 00:06:21 gpu-node-1 systemd[1]: sglang-k26-tp4ep2.service: Main process exited, code=exited, "
         "status=1/FAILURE", FindingClass.UNIT_FAILED, "exited with status 1/FAILURE"),
        ("May 26 00:06:21 gpu-node-1 systemd[1]: sglang-k26-tp4ep2.service: Failed with result 'exit-code'.",
         FindingClass.UNIT_FAILED, "'exit-code'"),
        ("sglang@tp4ep2.service: Start request repeated too quickly.", FindingClass.UNIT_FAILED, "start-limit-hit"),
        ("sglang.service: Failed with result 'oom-kill'.", FindingClass.HOST_OOM, "OOM killer"),
        ("kernel: Out of memory: Killed process 4242 (python3) total-vm:812345678kB",
         FindingClass.HOST_OOM, "process 4242 (python3)"),
        ("sglang.service: Main process exited, code=killed, status=9/KILL", FindingClass.UNIT_FAILED, "9/KILL"),
        ("sglang.service: Failed at step EXEC spawning /opt/venv/bin/python3: No such file or directory",
         FindingClass.UNIT_FAILED, "could not run the command"),
    ],
)
def test_every_class_from_the_facts(line, cls, in_summary):
    finding = classify_line(line)
    assert finding is not None, line
    assert finding.cls is cls
    assert in_summary in finding.summary
    assert finding.to_json()["class"] == cls.value


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-1:2140:2140 [3] NCCL INFO Call to bind failed: Address already in use",
        "gpu-node-1:2140:2140 [3] misc/socket.cc:484 NCCL WARN socketStartConnect: Call to bind failed : "
        "Address already in use",
        "sglang.service: Main process exited, code=exited, status=0/SUCCESS",
        "sglang.service: Failed with result 'success'.",
        "May 26 01:03:15 gpu-node-1 systemd[1]: Failed to start sglang.service - SGLang.",
        "[2026-05-26 00:04:10 TP0] Decode batch. #running-req: 1, #token: 311, token usage: 0.00",
        "[2026-05-26 00:03:45] The server is fired up and ready to roll!",
        "ValueError: an unclassified exception outside a traceback",
        '    raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")',
        "",
    ],
)
def test_ordinary_and_harmless_lines_are_no_finding(line):
    assert classify_line(line) is None


def test_stop_signals_are_not_fatal_but_crashes_are():
    assert not classify_line("x.service: Main process exited, code=killed, status=15/TERM").fatal
    assert classify_line("x.service: Main process exited, code=dumped, status=6/ABRT").fatal


def test_vllm_warning_level_is_not_fatal():
    line = "(EngineCore_DP0 pid=12) WARNING 05-26 00:06:20 [core.py:1] ncclUnhandledCudaError seen, retrying"
    finding = classify_line(line)
    assert finding.cls is FindingClass.NCCL and not finding.fatal and finding.rank == "DP0"


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[2026-05-26 00:06:20 TP2] Load weight begin.", "TP2"),
        ("[2026-05-26 00:06:20 DP0 TP3 EP3] Load weight begin.", "DP0 TP3 EP3"),
        ("[2026-05-26 00:06:20 PP1 TP0] Load weight begin.", "PP1 TP0"),
        ("(Worker_TP1_EP1 pid=1234) INFO 05-26 00:06:20 [x.py:1] hi", "TP1 EP1"),
        ("(EngineCore_DP0 pid=99) INFO 05-26 00:06:20 [x.py:1] hi", "DP0"),
        ("(VllmWorker TP3 pid=99) INFO 05-26 00:06:20 [x.py:1] hi", "TP3"),
        ("May 26 00:06:20 gpu-node-1 python3[1234]: [2026-05-26 00:06:20 TP2] hi", "TP2"),
        ("2026-05-26T00:06:20+0000 gpu-node-1 python3[1234]: (Worker_TP0 pid=7) hi", "TP0"),
        ("[rank5]:[E526 01:22:01.5 ProcessGroupNCCL.cpp:632] hi", "rank5"),
        ("\x1b[1;36m(Worker_TP2_EP2 pid=7)\x1b[0;0m \x1b[32mINFO\x1b[0m 05-26 00:06:20 [x.py:1] hi", "TP2 EP2"),
        ("[2026-05-26 00:06:20] launcher line", None),
        ("(APIServer pid=2961) INFO 05-26 00:06:20 [x.py:1] hi", None),
        ("May 26 00:06:21 gpu-node-1 systemd[1]: x.service: Failed with result 'exit-code'.", None),
        ("plain text [TP2] in the middle", None),
    ],
)
def test_parse_rank(line, rank):
    assert parse_rank(line) == rank


def test_traceback_block_reports_the_final_line_with_the_opening_rank():
    findings = triage_lines(_log("sglang_tp4ep2_oom.log"))
    ooms = [f for f in findings if f.cls is FindingClass.CUDA_OOM]
    assert [(f.rank, f.oom.gpu) for f in ooms] == [("TP2 EP1", 2), ("TP3 EP1", 3)]
    assert ooms[0].summary == "CUDA OOM on GPU 2 (TP2 EP1): tried 672.00 MiB with 136.94 MiB free of 94.97 GiB"
    assert [f.cls for f in findings].count(FindingClass.UNIT_FAILED) == 2


def _fed(lines: list[str]) -> list[Finding]:
    """The findings a live stream reports (no end of log)."""
    triager = Triager()
    return [f for line in lines for f in triager.feed(line)]


def test_unclassified_exception_that_killed_the_scheduler_is_an_engine_error():
    findings = _fed(
        [
            "[2026-05-26 00:06:20 TP1] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/x/scheduler.py", line 1, in run',
            "    do()",
            "KeyError: 'rope_scaling'",
        ]
    )
    assert len(findings) == 1
    f = findings[0]
    assert f.cls is FindingClass.ENGINE_ERROR and f.rank == "TP1" and f.fatal
    assert f.summary == "KeyError: 'rope_scaling'"
    assert f.line.endswith("KeyError: 'rope_scaling'") and f.seq == 4


def test_logged_traceback_of_unknown_weight_is_a_note_until_the_process_dies():
    lines = [
        "(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1]   File "/a.py", line 1, in f',
        "(EngineCore_DP0 pid=7) ERROR 05-26 00:05:33 [core.py:1] KeyError: 'x'",
    ]
    (note,) = _fed(lines)
    assert note.cls is FindingClass.TRACEBACK and not note.fatal and note.rank == "DP0"
    assert note.summary == "Python exception: KeyError: 'x'"
    died = [*lines, "sglang.service: Main process exited, code=exited, status=1/FAILURE"]
    d = decisive(triage_lines(died))
    assert (d.cls, d.summary, d.rank) == (FindingClass.ENGINE_ERROR, "KeyError: 'x'", "DP0")
    assert [c.cls for c in d.consequences] == [FindingClass.UNIT_FAILED]


def test_same_error_reported_once_per_rank():
    lines = []
    for _ in range(3):  # the same error repeated: no flood
        for rank in ("TP0", "TP1"):
            lines.append(f"[2026-05-26 00:12:31 {rank}] Scheduler hit an exception: Traceback (most recent call last):")
            lines.append('  File "/x.py", line 1, in f')
            lines.append("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    findings = triage_lines(lines)
    assert [f.rank for f in findings] == ["TP0", "TP1"]


def test_reset_reports_a_recurring_failure_again():
    triager = Triager()
    line = "x.service: Main process exited, code=exited, status=1/FAILURE"
    assert len(triager.feed(line)) == 1
    assert triager.feed(line) == []
    triager.reset()
    assert len(triager.feed(line)) == 1


def test_interleaved_vllm_tracebacks_stay_apart():
    def w(rank, text):
        return f"(Worker_{rank} pid={10 + int(rank[-1])}) ERROR 05-26 00:05:33 [m.py:1] {text}"

    lines = [
        w("TP0", "Traceback (most recent call last):"),
        w("TP1", "Traceback (most recent call last):"),
        w("TP0", '  File "/a.py", line 1, in f'),
        w("TP1", '  File "/a.py", line 1, in f'),
        w("TP1", "ValueError: bad shard"),
        w("TP0", "KeyError: 'x'"),
    ]
    findings = _fed(lines)
    assert [(f.rank, f.summary.split(": ", 1)[1]) for f in findings] == [
        ("TP1", "ValueError: bad shard"),
        ("TP0", "KeyError: 'x'"),
    ]


def test_continued_nccl_message_is_one_finding():
    lines = [
        "[2026-05-26 01:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x.py", line 1, in f',
        "torch.distributed.DistBackendError: NCCL error in: ../c10d/NCCLUtils.hpp:275, unhandled cuda error",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Cuda failure 'out of memory'",
    ]
    findings = triage_lines(lines)
    # The NCCL message's own continuation is no finding of its own; its last error, a failed CUDA
    # allocation, is one, and it is the root cause.
    assert [(f.cls, f.rank) for f in findings] == [(FindingClass.NCCL, "TP0"), (FindingClass.CUDA_OOM, None)]
    assert decisive(findings).cls is FindingClass.CUDA_OOM


def test_findings_carry_ts():
    triager = Triager()
    (finding,) = triager.feed("RuntimeError: CUDA error: an illegal memory access was encountered", ts=12.5)
    assert finding.ts == 12.5 and finding.to_json()["ts"] == 12.5


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sglang_tp8_ready.log", []),
        ("vllm_tp4_ready.log", []),
        ("sglang_tp4ep2_oom.log", ["cuda_oom", "cuda_oom", "engine_init", "unit_failed", "unit_failed"]),
        ("sglang_port_in_use.log", ["port_in_use"]),
        ("sglang_cuda_graph_failed.log", ["cuda_oom", "engine_init"]),
        ("sglang_kv_too_small.log", ["kv_cache_too_small", "kv_cache_too_small", "engine_init"]),
        ("sglang_nccl_timeout.log",
         ["illegal_memory_access", "nccl_timeout", "nccl_timeout", "nccl_timeout", "unit_failed", "unit_failed"]),
        ("vllm_ep_oom.log", ["cuda_oom", "cuda_oom", "engine_init", "engine_init"]),
        ("vllm_kv_too_small.log", ["engine_init", "kv_cache_too_small", "engine_init"]),
        ("vllm_memory_in_use.log", ["engine_init", "memory_in_use", "engine_init"]),
        ("vllm_weight_load_error.log", ["weight_load_error", "engine_init", "engine_init"]),
        # Three starts: each start's exit is its own finding, so the one that recurs is listed again.
        ("systemd_restart_loop.log", ["unit_failed"] * 8 + ["host_oom"] * 2 + ["unit_failed", "host_oom"]),
    ],
)
def test_fixture_logs(name, expected):
    assert [f.cls.value for f in triage_lines(_log(name))] == expected


@pytest.mark.parametrize(
    ("name", "cls", "rank"),
    [
        ("sglang_tp4ep2_oom.log", "cuda_oom", "TP2 EP1"),
        ("sglang_cuda_graph_failed.log", "cuda_oom", "TP0"),
        ("sglang_nccl_timeout.log", "illegal_memory_access", "TP3"),
        ("vllm_ep_oom.log", "cuda_oom", "TP1 EP1"),
        ("vllm_kv_too_small.log", "kv_cache_too_small", "DP0"),
        ("vllm_memory_in_use.log", "memory_in_use", "DP0"),
        ("vllm_weight_load_error.log", "weight_load_error", "TP0 EP0"),
        ("systemd_restart_loop.log", "host_oom", None),
        ("sglang_tp8_ready.log", None, None),
    ],
)
def test_fixture_logs_decisive_finding(name, cls, rank):
    d = decisive(triage_lines(_log(name)))
    assert (d.cls.value if d else None, d.rank if d else None) == (cls, rank)
    if d is not None:
        assert d.hint and all(c is not d for c in d.consequences)


def test_oom_during_cuda_graph_capture_is_an_oom_in_the_capture():
    finding = triage_lines(_log("sglang_cuda_graph_failed.log"))[0]
    assert finding.cls is FindingClass.CUDA_OOM and finding.context is FindingClass.CUDA_GRAPH
    assert finding.rank == "TP0" and finding.oom is not None
    assert finding.oom.tried_bytes == 2 * GIB and finding.oom.gpu == 0
    assert finding.to_json()["context"] == "cuda_graph"


def test_vllm_worker_oom_ranks():
    ooms = [f for f in triage_lines(_log("vllm_ep_oom.log")) if f.cls is FindingClass.CUDA_OOM]
    assert [f.rank for f in ooms] == ["TP1 EP1", "TP3 EP3"]
    assert ooms[0].oom.in_use_bytes == round(78.05 * GIB)


def test_every_needle_passes_a_gate():
    # The prefilter checks GATES only: a needle without a gate would never be seen. Exception needles
    # are matched only on lines holding "rror" or "xception", which are gates themselves.
    for needle in ALL_NEEDLES:
        assert any(gate in needle for gate in GATES), needle
    assert "rror" in GATES and "xception" in GATES
    assert all(sig.exception_needles or sig.needles for sig in SIGNATURES)


def test_a_traceback_whose_final_line_never_comes_expires():
    triager = Triager()
    assert triager.feed("[2026-05-26 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):") == []
    for i in range(500):
        triager.feed(f"[2026-05-26 00:00:01 TP1] Decode batch. #running-req: {i}")
    assert triager.feed("KeyError: 'late'") == []  # no longer part of a traceback
    assert triager.feed("RuntimeError: CUDA error: an illegal memory access was encountered")[0].rank is None


def test_summaries_carry_no_control_characters():
    finding = classify_line("RuntimeError: Engine core initialization failed. Failed core proc(s): {'\x1b[2J': 1}")
    finding2 = classify_line("Exception: Capture cuda graph failed: \x1b]0;pwned\x07 boom\ttab")
    for f in (finding, finding2):
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in f.summary), f.summary


def test_systemd_line_after_a_ranked_traceback_has_no_rank() -> None:
    lines = [
        "[2026-11-29 10:00:00 TP2 EP1] Scheduler hit an exception: Traceback (most recent call last):",
        '[2026-11-29 10:00:00 TP2 EP1]   File "model_runner.py", line 1, in load_model',
        "[2026-11-29 10:00:00 TP2 EP1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. "
        "GPU 2 has a total capacity of 94.97 GiB of which 136.94 MiB is free.",
        "sglang-k26@tp4ep2.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    oom, exited = triage_lines(lines)
    assert (oom.cls, oom.rank) == (FindingClass.CUDA_OOM, "TP2 EP1")
    assert (exited.cls, exited.rank) == (FindingClass.UNIT_FAILED, None)
