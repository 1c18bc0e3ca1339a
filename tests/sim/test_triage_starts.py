"""Triage of a log that holds several starts (issue 18, D18): the last start's cause, never linked across starts."""

from __future__ import annotations

import json
from pathlib import Path

from console.cli import main
from console.domain.triage.triager import Triager, triage_lines
from console.domain.values import Engine, FindingClass, JournalEntry, Phase
from console.hosts.journal_hub import JournalHub

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "logs"
SEED_OOM = FIXTURES / "sglang_tp4ep2_oom.log"  # systemd's Started, SGLang's start-up, the OOM, systemd's exit
VLLM_FAILED = CORPUS / "vllm_unsupported_architecture_gpt-oss-inspect-subprocess.log"  # real: vllm#22376
VLLM_HEALTHY = CORPUS / "vllm_healthy_qwen25-05b-tp2-per-rank-log-startup.log"  # real: vllm#24162


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "journal.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_a_repeated_oom_in_the_last_start_is_named_and_listed(tmp_path, capsys):
    one = _lines(SEED_OOM)
    assert main(["triage", "--json", _write(tmp_path, one + one)]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    top = rows[0]
    assert top["decisive"] and top["class"] == "cuda_oom" and top["start"] == 2
    assert top["line_no"] == len(one) + 32  # the second start's OOM, not the first's
    assert [r["class"] for r in rows if r["start"] == 2] == ["cuda_oom", "cuda_oom", "engine_init", "unit_failed",
                                                           "unit_failed"]
    assert [r["class"] for r in rows if r["start"] == 1] == ["cuda_oom", "cuda_oom", "engine_init", "unit_failed",
                                                           "unit_failed"]
    assert len(top["consequences"]) == 4  # its own start's consequences only


def test_the_text_names_the_last_start_and_each_earlier_starts_own_cause(tmp_path, capsys):
    one = _lines(SEED_OOM)
    assert main(["triage", "--engine", "sglang", _write(tmp_path, one + one)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cuda_oom") and out[0].endswith(f"(line {len(one) + 32}, start 2, loading_weights)")
    assert out[2].startswith(f"  which explains: cuda_oom (line {len(one) + 51}, start 2")
    assert out[3] == (f"  in the last of 2 starts (from line {len(one) + 1}); earlier: start 1 cuda_oom "
                      "(line 32, loading_weights)")


def test_a_healthy_start_after_a_failed_one_is_the_logs_outcome(tmp_path, capsys):
    # Real logs: vLLM fails on the model's architecture, then starts again (its banner again) and runs.
    failed, healthy = _lines(VLLM_FAILED), _lines(VLLM_HEALTHY)
    assert main(["triage", _write(tmp_path, failed + healthy)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"no fatal finding in the last of 2 starts (from line {len(failed) + 2}); earlier: "
                      "start 1 engine_error (line 6, starting); all findings:")
    assert out[1].startswith("engine_error") and "Error in inspecting model architecture" in out[1]
    assert out[1].endswith("(line 6, start 1, starting)")


def test_no_finding_of_one_start_explains_the_next_ones_death():
    # Start 1 logs an exception it survives, then stops cleanly; start 2 dies saying nothing of its own.
    engine = "(APIServer pid=7) ERROR 05-26 00:06:02 [api_server.py:90] "
    log = [
        "May 26 00:05:58 gpu-node-1 systemd[1]: Started vllm.service - vLLM.",
        "(APIServer pid=7) INFO 05-26 00:06:01 [api_server.py:1] vLLM API server version 0.11.0",
        f"{engine}Traceback (most recent call last):",
        f'{engine}  File "/vllm/entrypoints/openai/api_server.py", line 90, in lifespan',
        f"{engine}KeyError: 'x'",
        "May 26 00:07:00 gpu-node-1 systemd[1]: Stopping vllm.service - vLLM...",
        "May 26 00:07:01 gpu-node-1 systemd[1]: vllm.service: Deactivated successfully.",
        "May 26 00:07:01 gpu-node-1 systemd[1]: Stopped vllm.service - vLLM.",
        "May 26 00:07:02 gpu-node-1 systemd[1]: Started vllm.service - vLLM.",
        "(APIServer pid=9) INFO 05-26 00:07:04 [api_server.py:1] vLLM API server version 0.11.0",
        "May 26 00:07:09 gpu-node-1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    triager = Triager(Engine.VLLM)
    found = [f for line in log for f in triager.feed(line)] + triager.finish()
    assert [f.cls for f in found] == [FindingClass.TRACEBACK, FindingClass.UNIT_FAILED]
    top = triager.decisive()
    assert top.cls is FindingClass.UNIT_FAILED and top.consequences == ()
    assert triager.start.starts == 2 and triager.start.began_at == 9


def test_the_engines_first_line_again_begins_a_start_only_after_the_last_one_began():
    # vLLM's platform line comes before its banner: one start, however the log opens.
    assert Triager().start.starts == 1
    triager = Triager()
    for line in _lines(VLLM_HEALTHY):
        triager.feed(line)
    assert triager.start.starts == 1
    for line in _lines(VLLM_HEALTHY):
        triager.feed(line)
    assert triager.start.starts == 2  # the banner again: the engine started anew
    starting = Triager()
    starting.feed("May 26 00:05:57 gpu-node-1 systemd[1]: Starting vllm.service - vLLM...")
    starting.feed("May 26 00:05:58 gpu-node-1 systemd[1]: Started vllm.service - vLLM.")
    assert starting.start.starts == 1  # systemd's own lines before the first start are no start


# vLLM 0.11+ opens a start with its logo; these lines are the real vLLM 0.32.0 the test hosts run
# (tests/hosts/vllm/capture.sh: tp1-start.log and kv-too-small.log of tests/fixtures/vllm-real/).
VLLM_LOGO = [
    "(APIServer pid=86) INFO 12-01 15:45:12 [api_utils.py:347]        █     █     █▄   ▄█",
    "(APIServer pid=86) INFO 12-01 15:45:12 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
    "(APIServer pid=86) INFO 12-01 15:45:12 [api_utils.py:347]   █▄█▀ █     █     █     █  model   /opt/models/vllm-tiny/tiny-moe",
]
VLLM_KV = ("(EngineCore pid=6509) ERROR 12-01 15:49:28 [core.py:1510] ValueError: To serve at least one request with "
           "the model's max seq len (2048), (0.0 GiB KV cache is needed, which is larger than the available KV cache "
           "memory (0.0 GiB). Based on the available memory, the estimated maximum model length is 896.")


def test_vllms_logo_begins_a_start_as_its_banner_did():
    triager = Triager(Engine.VLLM)
    first = [f for line in [*VLLM_LOGO, VLLM_KV] for f in triager.feed(line)]
    assert [f.cls for f in first] == [FindingClass.KV_CACHE_TOO_SMALL]
    assert [f for line in VLLM_LOGO for f in triager.feed(line)] == [] and triager.start.starts == 2
    assert triager.decisive() is None  # the new start has shown nothing wrong
    assert [f.cls for f in triager.feed(VLLM_KV)] == [FindingClass.KV_CACHE_TOO_SMALL]  # again, in its start


def test_a_restart_loop_names_each_starts_exit_once():
    found = triage_lines(_lines(FIXTURES / "systemd_restart_loop.log"))
    exits = [f for f in found if "main process exited with status 1" in f.summary]
    assert len(exits) == 3  # one per start, each its own


class _Journal:
    def __init__(self, entries: list[JournalEntry]) -> None:
        self.entries = entries

    async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        for entry in self.entries:
            yield entry


async def test_the_last_message_of_a_start_never_fails_the_next():
    # An OOM whose figures a wrap cut off waits for them; systemd's Started ends that start instead.
    oom = "[2026-05-26 00:06:20 TP2] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB."
    entries = [
        JournalEntry("c0", 0.0, "u.service", "[2026-05-26 00:06:19 TP2] Load weight begin. avail mem=93.74 GB"),
        JournalEntry("c1", 1.0, "u.service", oom),
        JournalEntry("c2", 2.0, "u.service", "Started u.service - SGLang.", source="systemd"),
    ]
    hub = JournalHub(lambda: _Journal(entries))
    reads = [read async for read in hub.subscribe("u.service", engine=Engine.SGLANG, lines=None)]
    assert [f.cls for f in reads[2].findings] == [FindingClass.CUDA_OOM]  # the first start's, named
    assert reads[2].phase is not None and reads[2].phase.phase is Phase.STARTING  # the new start is not failed
    await hub.close()
