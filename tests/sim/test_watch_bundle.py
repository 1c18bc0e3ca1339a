"""`serve-console watch` keeps each host's rolling record and freezes an incident's bundle from it: a death
(an engine that failed) and a stall (ServeStalled, its evidence folder inside), the bundle's path in the
alert's annotations as Alertmanager holds them (a real binary, tests/alertmanager.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from pathlib import Path

import aiohttp
import pytest
from alertmanager import alertmanager, alertmanager_session  # noqa: F401 (fixtures)
from sim_fixtures import free_port, sim_host_config, stalling_host, until_ready
from watch_harness import Watch, until

from console.domain.alerts import ENGINE_FAILED, STALLED
from console.hosts.state_dir import state_dir
from console.ops.bundle import read_bundle
from console.ops.recorder import read_window

pytestmark = pytest.mark.slow
OOM_UNIT = "sim-k26@tp4ep2.service"


def _annotated(server, name: str, host: str) -> list[dict]:
    return [a for a in server.alerts(alertname=name, host=host) if a["annotations"].get("bundle")]


async def test_a_death_leaves_a_bundle_cut_from_the_record(sim_hosts, alertmanager, tmp_path) -> None:  # noqa: F811
    server, capture = alertmanager
    name = f"rec-{uuid.uuid4().hex[:8]}"
    host = sim_hosts(sim_host_config(name, time_scale=0.01))
    watch = Watch(host, tmp_path / "audit.sqlite3", server.url, capture.url)
    watch.start()
    try:
        await host.services.start(OOM_UNIT)
        found = await until(lambda: _annotated(server, ENGINE_FAILED, name), what="the bundle's annotation")
        bundle = read_bundle(Path(found[0]["annotations"]["bundle"]))
        assert bundle.header["source"] == "record" and bundle.incident["kind"] == ENGINE_FAILED
        assert bundle.header["evidence"] == found[0]["annotations"].get("evidence")
        kinds = {r["record"] for r in bundle.timeline}
        assert {"journal", "unit_state", "verdict"} <= kinds, kinds
        assert any("out of memory" in r.get("message", "").lower() for r in bundle.timeline if r["record"] == "journal")
        # frozen at the alert, which the journal's OOM line may raise before the unit is seen failed: the unit's
        # states are in the bundle, and its failed state reaches the record that the complete bundle is cut from
        assert any(r.get("unit") == OOM_UNIT for r in bundle.timeline if r["record"] == "unit_state")

        def failed_recorded() -> bool:
            return any(r["kind"] == "unit_state" and r.get("unit") == OOM_UNIT and r.get("active") == "failed"
                       for r in read_window(state_dir() / "record" / name))

        await until(failed_recorded, what="the unit's failed state in the record")
    finally:
        await watch.stop()


async def _stream(url: str) -> None:
    payload = {"model": "Qwen/Qwen3-30B-A3B", "prompt": "Hello", "max_tokens": 100000, "stream": True}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v1/completions", json=payload) as resp:
        async for _line in resp.content:
            pass


async def test_a_stall_leaves_a_bundle_with_its_evidence(sim_hosts, alertmanager, tmp_path, monkeypatch) -> None:  # noqa: F811
    server, capture = alertmanager
    monkeypatch.setenv("SERVE_CONSOLE_SIM_STALL_AFTER_S", "2")
    monkeypatch.setenv("SERVE_CONSOLE_SIM_STALL_FOR_S", "25")
    cfg = stalling_host(free_port(), "spin")
    service = dataclasses.replace(cfg.services[0], stall_after_s=4.0, canary=False)
    cfg = dataclasses.replace(cfg, name=f"rec-stall-{uuid.uuid4().hex[:6]}", services=(service,))
    host = sim_hosts(cfg)
    watch = Watch(host, tmp_path / "audit.sqlite3", server.url, capture.url)
    await host.services.start(service.unit_for(service.layouts[0]))
    await until_ready(host, service)
    request = asyncio.create_task(_stream(service.url))
    watch.start()
    try:
        found = await until(lambda: _annotated(server, STALLED, cfg.name), timeout_s=60, what="the stall's bundle")
        notes = found[0]["annotations"]
        bundle = read_bundle(Path(notes["bundle"]))
        assert bundle.incident["kind"] == STALLED and bundle.header["evidence"] == notes["evidence"]
        assert bundle.evidence_files, "the stall's evidence files are inside the bundle"
        kinds = {r["record"] for r in bundle.timeline}
        assert {"metrics", "health", "triage", "evidence"} <= kinds, kinds
        assert any(r.get("state") == "stalled" for r in bundle.timeline if r["record"] == "triage")
    finally:
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await request
        await watch.stop()
