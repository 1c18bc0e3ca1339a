"""Evidence before it is lost (issue 26, item 4), on the simulated vLLM host: what one incident's folder
holds, once per incident, within its deadline; and that a stop or restart of a failed service collects
it first.

The simulated engines are real processes, so where py-spy is installed (the test extras carry it) a
folder holds a real Python stack of the engine; where it is not, the reason is in the manifest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
from headless_cli import cli, demo_env, json_lines  # noqa: F401 (demo_env is a fixture)
from sim_fixtures import free_port, qwen_host
from waiting import await_for

from console.config import LayoutConfig
from console.domain.layout import parse_layout
from console.ops.evidence import collect_evidence, evidence_before, incident_of, latest_evidence
from console.ops.switch.events import result_from_json
from console.ops.switch.failure_text import failure_rows
from console.ops.switch.orchestrate import switch_layout
from console.ops.switch.service_control import restart_service, stop_service

HAS_PY_SPY = bool(shutil.which("py-spy") or (Path(sys.executable).parent / "py-spy").exists())


def host_config(port: int):
    cfg = qwen_host(port)
    service = cfg.services[0]
    key = LayoutConfig("TP4 key", dataclasses.replace(parse_layout("TP4"),
                                                      extra_args=("--api-key", "sk-evidence-secret-1234")))
    dies = LayoutConfig("TP4 dies", dataclasses.replace(parse_layout("TP4"), extra_args=("--fail", "engine_dead")))
    kv = LayoutConfig("TP4 kv", dataclasses.replace(parse_layout("TP4"), extra_args=("--fail", "kv")))
    return dataclasses.replace(cfg, services=(dataclasses.replace(service, layouts=(*service.layouts, key, dies, kv)),))


@pytest.fixture
def state_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    return tmp_path


def parts(manifest: dict) -> dict[tuple[str, str | None], dict]:
    return {(p["name"], p["unit"]): p for p in manifest["parts"]}


async def test_a_running_engines_evidence_holds_every_part_or_why_not(sim_hosts, state_root) -> None:
    host = sim_hosts(host_config(free_port()))
    service = host.config.services[0]
    ready = await switch_layout(host, None, "TP4 key", timeout_s=60)
    assert ready.outcome == "ready", ready.reason
    evidence = await collect_evidence(host, service, "a test incident", kind="stalled", key="k1", since=1.0e9)
    assert evidence.path.parent == state_root / "evidence" and evidence.path.name.startswith("20010909T014640Z-h100-qwen3-")
    manifest = json.loads((evidence.path / "manifest.json").read_text())
    assert manifest == evidence.manifest and manifest["format"] == "serve-console-evidence/1"
    got = parts(manifest)
    assert got[("units", None)]["status"] == "ok"
    units = [json.loads(line) for line in (evidence.path / "units.jsonl").read_text().splitlines()]
    assert {u["unit"] for u in units} == set(service.all_units())
    assert any(u["active"] == "active" and u["main_pid"] for u in units)
    running = service.unit_for(service.layout("TP4 key"))
    journal = got[("journal", running)]
    assert journal["status"] == "ok", journal
    text = (evidence.path / journal["file"]).read_text()
    assert "Application startup complete." in text and len(text.splitlines()) <= 500
    assert "sk-evidence-secret-1234" not in "".join(f.read_text() for f in evidence.path.iterdir())  # redacted
    gpus = got[("gpus", None)]
    assert gpus["status"] == "ok", gpus
    assert "Clocks Event Reasons" in (evidence.path / gpus["file"]).read_text()
    metrics = got[("metrics", None)]
    assert metrics["status"] == "ok" and "vllm:" in (evidence.path / metrics["file"]).read_text()
    ras = got[("ras", None)]
    assert ras["status"] == "unavailable" and ras["why"].startswith("no NCCL RAS on h100:28028")
    stacks = got[("stacks", None)]
    if HAS_PY_SPY:
        assert stacks["status"] == "ok", stacks
        dump = (evidence.path / stacks["file"]).read_text()
        assert "=== pid " in dump and "Thread " in dump and "console/sim" in dump  # the engine's own frames
    else:
        assert stacks["status"] == "unavailable" and stacks["why"] == "py-spy not installed on h100"
    again = await collect_evidence(host, service, "the same incident", kind="stalled", key="k1", since=1.0e9)
    assert again.reused and again.path == evidence.path  # once per incident
    assert latest_evidence(state_root, "h100", "qwen3") == evidence.path


async def test_a_part_past_the_deadline_is_named_timed_out(sim_hosts, state_root, monkeypatch) -> None:
    host = sim_hosts(host_config(free_port()))
    service = host.config.services[0]
    from console.ops.evidence import parts as evidence_parts

    async def never(node) -> str:
        await asyncio.Event().wait()
        return ""

    monkeypatch.setattr(evidence_parts, "gpus_text", never)
    evidence = await collect_evidence(host, service, "slow GPUs", kind="stalled", key="k2", deadline_s=1.0)
    gpus = parts(evidence.manifest)[("gpus", None)]
    assert gpus["status"] == "timed-out" and gpus["file"] is None
    assert evidence.timed_out == ["gpus@h100"] and "timed out: gpus@h100" in evidence.words()
    assert parts(evidence.manifest)[("units", None)]["status"] == "ok"  # the others were kept


async def test_stopping_a_failed_service_collects_its_evidence_first(sim_hosts, state_root) -> None:
    host = sim_hosts(host_config(free_port()))
    service = host.config.services[0]
    died = await switch_layout(host, None, "TP4 dies", timeout_s=60, rollback=False)
    dies = service.unit_for(service.layout("TP4 dies"))
    # the engine dies 3 s (story time) after it is ready
    incident = await await_for(lambda: incident_of(host, service), f"the incident of {dies}", timeout_s=30)
    assert incident is not None, died
    assert incident.kind == "engine_died" and dies in incident.reason
    result = await stop_service(host, service)
    assert result.evidence is not None, result
    manifest = json.loads((Path(result.evidence) / "manifest.json").read_text())
    assert manifest["trigger"] == "stop" and manifest["kind"] == "engine_died"
    journal = parts(manifest)[("journal", dies)]
    assert "engine core exited unexpectedly" in (Path(result.evidence) / journal["file"]).read_text()
    stacks = parts(manifest)[("stacks", None)]
    assert stacks["status"] == "unavailable" and stacks["why"].startswith("no engine process runs on h100")
    assert result.to_json()["evidence"] == result.evidence
    restart = await restart_service(host, service, timeout_s=60)  # nothing to restart: the engine exited 0
    assert restart.evidence == result.evidence  # the same incident: collected once, found again


async def test_a_healthy_service_is_in_no_incident(sim_hosts, state_root) -> None:
    host = sim_hosts(host_config(free_port()))
    service = host.config.services[0]
    assert (await switch_layout(host, None, "TP4", timeout_s=60)).outcome == "ready"
    assert await incident_of(host, service) is None
    assert await evidence_before(host, service, "stop") is None
    result = await stop_service(host, service)
    assert result.outcome == "stopped" and result.evidence is None


def test_a_failed_switch_keeps_its_evidence_before_the_rollback_and_status_names_it(demo_env) -> None:  # noqa: F811
    cwd, env = demo_env
    assert cli(cwd, env, "switch", "EP8", "--json").returncode == 0
    run = cli(cwd, env, "switch", "TP4EP2", "--force", "--json")
    assert run.returncode == 1, run.stderr
    result = json_lines(run.stdout)[-1]
    assert result["outcome"] == "failed" and result["rollback"]["outcome"] == "ready", result
    folder = Path(result["evidence"])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["trigger"] == "rollback" and manifest["kind"] == "cuda_oom", manifest
    steps = [e for e in json_lines(run.stdout) if e["event"] == "step" and e["step"] == "evidence"]
    assert steps and steps[0]["detail"] == f"evidence: {folder}"
    journals = [p for p in manifest["parts"] if p["name"] == "journal" and p["file"]]
    assert any("CUDA out of memory" in (folder / p["file"]).read_text() for p in journals)
    card = {row.label: row.value for row in failure_rows(result_from_json(result))}
    assert card["evidence"] == str(folder)  # the failure card's row
    status = cli(cwd, env, "status", "--json")
    lines = [s for s in json_lines(status.stdout) if s.get("service") == result["service"]
             and s.get("host") == result["host"]]
    assert lines and lines[0]["evidence"] == str(folder)


async def test_each_failed_start_is_its_own_incident_and_a_stop_after_it_finds_its_folder(sim_hosts, state_root) -> None:
    host = sim_hosts(host_config(free_port()))
    service = host.config.services[0]
    first = await switch_layout(host, None, "TP4 kv", timeout_s=60, rollback=False)
    second = await switch_layout(host, None, "TP4 kv", timeout_s=60, rollback=False)
    assert (first.outcome, second.outcome) == ("failed", "failed"), (first.reason, second.reason)
    assert first.evidence and second.evidence and first.evidence != second.evidence  # two starts, two incidents
    manifest = json.loads((Path(second.evidence) / "manifest.json").read_text())
    assert manifest["trigger"] == "verdict" and manifest["unit"] == second.unit
    stop = await stop_service(host, service)  # the failure a moment later, as the CLI or the TUI sees it
    assert stop.evidence == second.evidence
