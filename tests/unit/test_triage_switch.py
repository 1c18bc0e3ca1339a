"""A switch fails with triage's decisive finding: the root cause, never a bare summary of the death."""

from __future__ import annotations

import asyncio
import time

from console.config import ServiceConfig
from console.domain.triage.triager import Triager
from console.domain.values import Engine, FindingClass, JournalEntry, UnitState
from console.hosts.journal_hub import ReadEntry
from console.ops.switch.start_follow import UNIT_LINE_TRAIL_S, StartFollower

SERVICE = ServiceConfig(name="llm", engine=Engine.VLLM, url="http://127.0.0.1:8000")
ENGINE = "(EngineCore_DP0 pid=3120) ERROR 05-26 00:06:02 [core.py:708] "


def _watch() -> StartFollower:
    watch = StartFollower(None, SERVICE, "vllm.service", layout="TP4", emit=lambda event: None,  # type: ignore[arg-type]
                       started_mono=time.monotonic())
    watch._verdict = asyncio.get_running_loop().create_future()
    return watch


def _feed(watch: StartFollower, triager: Triager, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        entry = JournalEntry(cursor=f"c{i}", ts=1000.0 + i, unit="vllm.service", message=line)
        watch.on_entry(ReadEntry(entry, tuple(triager.feed(line, entry.ts))))


async def test_the_engines_summary_waits_for_the_cause_logged_after_it():
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [f"{ENGINE}EngineCore failed to start.", f"{ENGINE}Traceback (most recent call last):"])
    assert not watch.decided()  # "failed to start" is a summary: its cause may follow
    _feed(watch, triager, [
        f'{ENGINE}  File "/vllm/v1/core/kv_cache_utils.py", line 758, in _check_enough_kv_cache_memory',
        f"{ENGINE}ValueError: To serve at least one request with the models's max seq len (262144), (17.50 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (6.12 GiB).",
    ])
    verdict = await asyncio.wait_for(asyncio.shield(watch._verdict), UNIT_LINE_TRAIL_S + 2)
    assert verdict.failure.cls is FindingClass.KV_CACHE_TOO_SMALL
    assert [c.cls for c in verdict.failure.consequences] == [FindingClass.ENGINE_INIT]


async def test_a_death_after_an_exception_fails_with_the_exception_not_unit_failed():
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [
        f"{ENGINE}Traceback (most recent call last):",
        f'{ENGINE}  File "/a.py", line 1, in f',
        f"{ENGINE}ZeroDivisionError: division by zero",
        "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    ])
    verdict = await asyncio.wait_for(asyncio.shield(watch._verdict), UNIT_LINE_TRAIL_S + 2)
    assert verdict.failure.cls is FindingClass.ENGINE_ERROR
    assert verdict.reason == "ZeroDivisionError: division by zero" and verdict.failure.rank == "DP0"


async def test_a_death_the_unit_state_sees_names_the_exception_the_journal_holds():
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [f"{ENGINE}Traceback (most recent call last):", f"{ENGINE}KeyError: 'x'"])
    reason, failure = watch._state_cause(UnitState(unit="vllm.service", active="failed", result="exit-code"))
    assert failure.cls is FindingClass.ENGINE_ERROR and reason == "KeyError: 'x'"


async def test_a_death_inside_the_weight_loader_names_the_load_not_unit_failed():
    # The process was killed mid-traceback: no final exception line, then systemd's exit status.
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [
        f"{ENGINE}Traceback (most recent call last):",
        f'{ENGINE}  File "/vllm/model_executor/models/llama.py", line 471, in load_weights',
        f"{ENGINE}    weight_loader(param, loaded_weight)",
        "vllm.service: Main process exited, code=killed, status=9/KILL",
    ])
    verdict = await asyncio.wait_for(asyncio.shield(watch._verdict), UNIT_LINE_TRAIL_S + 2)
    assert verdict.failure.cls is FindingClass.WEIGHT_LOAD_ERROR


async def test_a_death_the_unit_state_sees_after_a_cut_traceback_names_it():
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [
        f"{ENGINE}Traceback (most recent call last):",
        f'{ENGINE}  File "/vllm/model_executor/model_loader/weight_utils.py", line 500, in safetensors_weights_iterator',
    ])
    _, failure = watch._state_cause(UnitState(unit="vllm.service", active="failed", result="signal"))
    assert failure.cls is FindingClass.WEIGHT_LOAD_ERROR


async def test_a_death_with_nothing_in_the_journal_is_unit_failed():
    watch, triager = _watch(), Triager()
    _feed(watch, triager, [f"{ENGINE.replace('ERROR', 'INFO')}Loading weights took 3.1 s"])
    _, failure = watch._state_cause(UnitState(unit="vllm.service", active="failed", result="signal"))
    assert failure.cls is FindingClass.UNIT_FAILED
