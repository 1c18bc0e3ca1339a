"""A stalled engine named by the status path: processes alive, /health 200, no progress (issue 26).

The simulated vLLM's `--fail spin` / `--fail diverged` stop every step once a request runs, as a
collective that never completes does; `--fail stall` blocks the scheduler. `status` is judged against
the state dir's memory, so readings a few seconds apart name the stall once it lasted stall_after_s.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from sim_fixtures import free_port, stalling_host, until_ready
from waiting import WaitTimeout, await_for

from console.ops.engine_status import engine_readings
from console.ops.serving import MemoryFile, serving_line, status_verdict
from console.ops.status import service_status


def _proc_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


async def _stream(url: str, tokens: list[str]) -> None:
    payload = {"model": "Qwen/Qwen3-30B-A3B", "prompt": "Hello", "max_tokens": 4000, "stream": True}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v1/completions", json=payload) as resp:
        async for line in resp.content:
            tokens.append(line.decode())


async def _until_stalled(host, service, memories, timeout_s: float = 120.0):
    """status runs, a second or so apart, until one says stalled; every health reading on the way."""
    healths: list = []
    box = {"memories": memories}

    async def stalled():
        st = await service_status(host, service, fresh_health=True)
        healths.append(st.health.http_status if st.health else None)
        _, _, scrapes = await engine_readings(host, service, running=st.active_unit is not None, interval_s=0.2)
        verdict = await status_verdict(host, service, st, scrapes, box["memories"])
        box["memories"].save()
        box["memories"] = MemoryFile(box["memories"].path.parent)  # the next run reads the file, as a new process would
        return (verdict, st) if verdict.state == "stalled" else None

    # interval_s: status run once a second, as a cron script would
    try:
        verdict, st = await await_for(stalled, "a stalled verdict", timeout_s=timeout_s, interval_s=1.0)
    except WaitTimeout as error:
        raise AssertionError(f"{error}; health {healths}") from None
    return verdict, healths, _proc_state(st.active_state.main_pid)


async def _stalled_verdict(sim_hosts, tmp_path, kind: str):
    host = sim_hosts(stalling_host(free_port(), kind))
    service = host.config.services[0]
    unit = service.unit_for(service.layouts[0])
    await host.services.start(unit)
    await until_ready(host, service)
    tokens: list[str] = []
    request = asyncio.create_task(_stream(service.url, tokens))
    try:
        return await _until_stalled(host, service, MemoryFile(tmp_path))
    finally:
        request.cancel()
        await host.services.stop(unit)


async def test_all_ranks_spinning_is_stalled_while_health_answers_200(sim_hosts, tmp_path) -> None:
    verdict, healths, proc_state = await _stalled_verdict(sim_hosts, tmp_path, "spin")
    assert set(healths) == {200}  # vLLM's /health never notices
    # the verdict comes from progress: the engine's process is running or sleeping, never stopped (T)
    assert proc_state in "RS"
    doc = verdict.to_json()
    assert doc["pending"]["running"] == 1
    # the stall's evidence is kept at its verdict, before anything restarts it (item 4)
    manifest = json.loads((Path(doc["evidence"]) / "manifest.json").read_text())
    assert manifest["kind"] == "stalled" and manifest["trigger"] == "verdict"
    parts = {part["name"]: part["status"] for part in manifest["parts"]}
    assert parts["metrics"] == "ok" and parts["journal"] == "ok" and "stacks" in parts
    assert "vllm:generation_tokens_total" in doc["reason"]
    assert doc["ranks"] == [] and "all ranks look alike" in (verdict.ranks_words or "")
    assert serving_line(verdict).startswith("serving: STALLED, no progress for ")


async def test_one_rank_diverged_is_named(sim_hosts, tmp_path) -> None:
    verdict, healths, _ = await _stalled_verdict(sim_hosts, tmp_path, "diverged")
    assert set(healths) == {200}
    assert verdict.ranks == ("GPU 3",)
    assert "GPU 3 idle at 0%" in (verdict.ranks_words or "") and "3 GPUs spin at" in (verdict.ranks_words or "")
