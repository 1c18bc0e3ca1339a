"""After a failure, the advice fits the failure and the engine (issue 18, D16).

A weights OOM (the fit knows the weights alone exceed the GPU) names the layouts that fit, on the card
and in the CLI's verdict; a hint names only the flags of the service's own engine.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from console.commands.switch_output import verdict_lines
from console.domain.triage.catalogue import CATALOGUE, WEIGHTS_OOM_HINT, hint_for
from console.domain.triage.triager import Triager
from console.domain.values import Engine, Finding, FindingClass, JournalEntry
from console.hosts.journal_hub import JournalHub
from console.ops.switch import SwitchResult, failure_rows
from console.ops.switch.failure_text import with_advice
from console.ops.switch.orchestrate import switch_layout

SGLANG_ONLY = {"--mem-fraction-static", "--context-length", "--cuda-graph-max-bs", "--disable-cuda-graph",
               "--model-path", "--max-running-requests", "--chunked-prefill-size", "--attention-backend",
               "--enable-torch-compile"}
VLLM_ONLY = {"--gpu-memory-utilization", "--max-model-len", "--enforce-eager", "--max-num-seqs"}
OOM = ("[2026-05-26 00:06:20 TP2] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. "
       "GPU 2 has a total capacity of 94.97 GiB of which 136.94 MiB is free.")


def _flags(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]+", text))


@pytest.mark.parametrize("cls", list(CATALOGUE), ids=str)
def test_a_hint_names_only_its_engines_flags(cls):
    sglang, vllm = hint_for(cls, Engine.SGLANG), hint_for(cls, Engine.VLLM)
    assert not _flags(sglang) & VLLM_ONLY and "VLLM_" not in sglang
    assert not _flags(vllm) & SGLANG_ONLY and "SGLANG_" not in vllm
    assert hint_for(cls) == CATALOGUE[cls].hint  # an unknown engine's log gets both spellings, as before


def test_triage_of_a_known_engine_says_its_own_flags():
    sglang = Triager(Engine.SGLANG).feed(OOM)[0]
    vllm = Triager(Engine.VLLM).feed(OOM)[0]
    unknown = Triager().feed(OOM)[0]
    assert "--mem-fraction-static" in sglang.hint and "--gpu-memory-utilization" not in sglang.hint
    assert "--gpu-memory-utilization" in vllm.hint and "--mem-fraction-static" not in vllm.hint
    assert unknown.hint == hint_for(FindingClass.CUDA_OOM)


class _Journal:
    async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        yield JournalEntry("c0", 0.0, unit, OOM)


@pytest.mark.parametrize(("engine", "own", "other"), [
    (Engine.SGLANG, "--mem-fraction-static", "--gpu-memory-utilization"),
    (Engine.VLLM, "--gpu-memory-utilization", "--mem-fraction-static"),
])
async def test_a_services_journal_is_triaged_in_its_engines_terms(engine, own, other):
    hub = JournalHub(lambda: _Journal())
    (read,) = [read async for read in hub.subscribe("u.service", engine=engine)]
    assert own in read.findings[0].hint and other not in read.findings[0].hint
    await hub.close()


def _oom_result(fit: dict | None) -> SwitchResult:
    failure = Finding(FindingClass.CUDA_OOM, OOM, "CUDA OOM on GPU 2", "TP2", True,
                      hint=hint_for(FindingClass.CUDA_OOM, Engine.SGLANG))
    return SwitchResult(host="h", service="s", layout="TP4 EP2", outcome="failed", failure=failure, fit=fit)


def _do(rows) -> str:
    return next(row.value for row in rows if row.label == "do")


def test_the_advice_for_weights_that_alone_exceed_the_gpu():
    fit = {"weights_gib_per_gpu": 141.69, "gpu_mem_gib": 94.97, "verdict": "oom"}
    assert _do(failure_rows(_oom_result(fit), ["TP8 (fits)", "PP8 (tight)"], pick="press l")) == (
        "the weights alone need 141.69 GiB per GPU; layouts that fit: TP8, PP8 (tight) (press l)")
    assert _do(failure_rows(_oom_result(fit))) == (
        "the weights alone need 141.69 GiB per GPU, more than the GPU holds: spread them over more GPUs (TP, PP or EP)")
    # The weights fit: the OOM is the memory settings', and the hint says which.
    small = {"weights_gib_per_gpu": 73.22, "gpu_mem_gib": 94.97, "verdict": "fits"}
    assert _do(failure_rows(_oom_result(small), ["TP8 (fits)"])) == hint_for(FindingClass.CUDA_OOM, Engine.SGLANG)
    assert _do(failure_rows(_oom_result(None))) == hint_for(FindingClass.CUDA_OOM, Engine.SGLANG)


async def test_a_forced_weights_oom_names_the_layouts_that_fit_on_the_card_and_the_cli(sim_hosts):
    host = sim_hosts()
    result = await switch_layout(host, None, "TP4 EP2", force=True, rollback=False, timeout_s=60)
    assert result.outcome == "failed" and result.failure.cls is FindingClass.CUDA_OOM
    assert result.to_json()["fit"]["fits_instead"] == ["EP8", "TP8"]
    card = _do(failure_rows(result, ["EP8 (fits)", "TP8 (fits)"], pick="press l"))
    assert card == "the weights alone need 141.69 GiB per GPU; layouts that fit: EP8, TP8 (press l)"
    cli = verdict_lines(result)
    assert "  do: the weights alone need 141.69 GiB per GPU; layouts that fit: EP8, TP8 (serve-console switch LAYOUT)" in cli
    text = "\n".join(cli)
    assert "--gpu-memory-utilization" not in text and "lower --mem-fraction-static" not in text
    assert not _flags(result.failure.hint) & VLLM_ONLY  # the SGLang service's own flags only
    # Issue 30 B4: `switch --json`'s failure.hint says what the card says, not "lower --mem-fraction-static".
    hint = "the weights alone need 141.69 GiB per GPU; layouts that fit: EP8, TP8 (serve-console switch LAYOUT)"
    assert result.failure.hint == hint and result.to_json()["failure"]["hint"] == hint


LOAD_BEGIN = "[2026-05-26 00:06:10 TP2] Load weight begin. avail mem=94.50 GB"


@pytest.mark.parametrize("engine", [Engine.SGLANG, Engine.VLLM, None])
def test_an_oom_while_the_weights_load_gets_no_memory_flag(engine):
    # Issue 30 B4: the phase is known from the engine's own words, so the advice is the fit's from the first frame.
    triager = Triager(engine)
    triager.feed(LOAD_BEGIN)
    (oom,) = triager.feed(OOM)
    assert oom.hint == WEIGHTS_OOM_HINT
    assert not _flags(oom.hint), oom.hint  # no --mem-fraction-static, no --gpu-memory-utilization
    after = Triager(engine)  # once they have loaded, an OOM is the memory settings' again
    for line in (LOAD_BEGIN, "[2026-05-26 00:06:15 TP2] Load weight end. type=X, avail mem=20.00 GB", OOM):
        found = after.feed(line)
    assert found[0].hint == hint_for(FindingClass.CUDA_OOM, engine)


async def test_the_hub_says_so_too_for_the_watch_and_its_alerts():
    class Loading:
        async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
            yield JournalEntry("c0", 0.0, unit, LOAD_BEGIN)
            yield JournalEntry("c1", 0.0, unit, OOM)

    hub = JournalHub(lambda: Loading())
    reads = [read async for read in hub.subscribe("u.service", engine=Engine.SGLANG)]
    assert [f.hint for read in reads for f in read.findings] == [WEIGHTS_OOM_HINT]
    await hub.close()


def test_a_switch_knows_the_figures_and_puts_them_in_the_findings_hint():
    fit = {"weights_gib_per_gpu": 141.69, "gpu_mem_gib": 94.97, "verdict": "oom", "fits_instead": ["EP8", "TP8"]}
    failure = Finding(FindingClass.CUDA_OOM, OOM, "CUDA OOM on GPU 2", "TP2", True, hint=WEIGHTS_OOM_HINT)
    result = with_advice(SwitchResult(host="h", service="s", layout="TP4 EP2", outcome="failed", failure=failure,
                                      fit=fit))
    hint = "the weights alone need 141.69 GiB per GPU; layouts that fit: EP8, TP8 (serve-console switch LAYOUT)"
    assert result.failure.hint == hint and result.to_json()["failure"]["hint"] == hint
    # The fit thought they fit, yet the GPU ran out while they loaded: the figure, and no memory flag.
    small = {"weights_gib_per_gpu": 73.22, "gpu_mem_gib": 94.97, "verdict": "fits"}
    told = with_advice(replace(result, fit=small)).failure.hint
    assert told.startswith("the weights alone need 73.22 GiB per GPU, and the GPU ran out") and not _flags(told)
