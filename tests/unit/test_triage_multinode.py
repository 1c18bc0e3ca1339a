"""Issue 30 C11 and E28: the failures of services over several hosts and of expert parallelism are named
for what they are, and a stop that was asked for is no failure, however its shutdown noise reads. The real
logs are scored in tests/unit/test_corpus_multinode.py; these are the rules, one line each."""

from __future__ import annotations

import pytest

from console.domain.triage.triager import Triager
from console.domain.values import Engine, FindingClass

C = FindingClass


def _decisive(lines: list[str], engine: Engine | None = None):
    triager = Triager(engine)
    for line in lines:
        triager.feed(line)
    triager.finish()
    return triager.decisive()


@pytest.mark.parametrize(("line", "cls", "words"), [
    ("/sgl-workspace/nvshmem/src/host/init/init.cu:nvshmemi_check_state_and_init:1080: nvshmem initialization "
     "failed, exiting", C.NVSHMEM_INIT, "initialization failed"),
    ("/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:1433: non-zero status: 7 ep_connect failed",
     C.NVSHMEM_INIT, "ep_connect failed"),
    ("DeepEP dispatch NVL receiver timeout, channel: 0, RDMA: 0, nvl: 7, src RDMA: 1, src nvl: 1, start: 0, end: 0",
     C.DEEPEP_TIMEOUT, "another expert-parallel rank"),
    ("RuntimeError: DeepEP error: CPU recv timeout", C.DEEPEP_TIMEOUT, "CPU recv timeout"),
    ("[2026-01-02 10:00:00 DP1 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
     C.ENGINE_WATCHDOG, "300 s"),
    ("[rank1]:[E528 08:52:46.164295950 ProcessGroupGloo.cpp:145] Gloo connectFullMesh failed with "
     "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error", C.GLOO, "connectFullMesh"),
    ("ERROR 08-28 06:06:54 [core.py:502] TimeoutError: RPC call to execute_model timed out.", C.ENGINE_WATCHDOG,
     "execute_model"),
    ("[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce8' with exception "
     "KVTransferError(bootstrap_room=1): Failed due to an unknown reason from another rank", C.KV_TRANSFER, "KV"),
    ("(Worker_DP0_TP5 pid=2543213) ERROR 12-10 03:24:54 [mooncake_connector.py:329] Failed to transfer KV cache "
     "for request cmpl-09be: Mooncake transfer failed, ret: -1", C.KV_TRANSFER, "Mooncake"),
    ("host-1:183006:183220 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer host-2<47861>",
     C.NCCL, "lost a peer"),
])
def test_each_kind_is_named_for_what_it_is(line, cls, words):
    top = _decisive([line])
    assert top is not None and top.fatal and top.cls is cls and words in top.summary, top


@pytest.mark.parametrize("line", [
    "WARN: init failed for remote transport: ibrc",  # NVSHMEM may do without one transport
    "[2026-01-02 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=60, self.soft=True)",  # dump only
    "[2025-11-05 16:39:09 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='78fd' with "
    "exception KVTransferError(bootstrap_room=47): Aborted by AbortReq.",  # the client aborted it
    "host-1:14135:14135 [2] NCCL WARN NET/Plugin: Could not find: libnccl-net.so.",
    "ERROR 05-01 10:00:01 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1234 died, exit code: -15",
])
def test_what_is_no_failure_of_its_own_is_a_note(line):
    assert _decisive([line]) is None


SERVING = [
    "[2025-08-02 19:24:10] The server is fired up and ready to roll!",
    '[2025-08-02 19:24:26] INFO:     172.16.19.148:37398 - "POST /v1/completions HTTP/1.1" 200 OK',
]


def test_sglangs_watchdog_while_serving_is_a_hung_forward_not_a_start_that_gave_up():
    # E28: SGLang's own watchdog, then its sigquit and its process tree killed.
    top = _decisive([*SERVING, "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)",
                     "[2025-08-02 19:24:35] Received sigquit from a child process. It usually means the child failed.",
                     "Killed"], Engine.SGLANG)
    assert top is not None and top.cls is C.ENGINE_WATCHDOG and top.rank == "TP3", top
    assert "300" in top.summary and "gave up starting" not in (top.hint or "") and "--watchdog-timeout" in top.hint


def test_a_stop_asked_by_ctrl_c_is_no_failure_however_its_workers_end():
    top = _decisive([
        "Traceback (most recent call last):",
        '  File "/x/serve.py", line 96, in <module>',
        "    main()",
        "KeyboardInterrupt",
        "CRITICAL 04-17 03:26:10 [multiproc_executor.py:49] MulitprocExecutor got fatal signal from worker "
        "processes, shutting down. See stack trace above for root cause issue.",
        "Traceback (most recent call last):",
        '  File "/x/worker.py", line 1, in busy_loop',
        "RuntimeError: Event loop stopped before Future completed.",
        "ERROR 04-17 03:26:11 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 9 died, exit code: -6",
    ])
    assert top is None, top


def test_a_failure_before_the_stop_still_counts():
    top = _decisive(["[2025-05-12 13:58:24 DP3 TP3] Watchdog timeout (self.watchdog_timeout=300)",
                     "^C(EngineCore pid=3946143) INFO 05-26 19:19:56 [core.py:1155] [shutdown] EngineCore: "
                     "trigger received signal=SIGINT"])
    assert top is not None and top.cls is C.ENGINE_WATCHDOG
