"""The fleet without [fleet]: one row per host over its own connection (source "ssh")."""

from __future__ import annotations

from pathlib import Path

from sim_fixtures import SimHosts, free_port, sim_host_config
from waiting import await_for

from console.config import HostConfig
from console.hosts.remote import build_remote_host
from console.ops.fleet.over_ssh import ssh_row


async def test_a_reachable_host_gives_its_gpus_and_no_engine_figures(tmp_path: Path) -> None:
    hosts = SimHosts(tmp_path)
    host = hosts(sim_host_config("sim1"))
    try:
        row = await ssh_row(host)
    finally:
        await hosts.close()
    assert (row.host, row.source, row.up, row.stale, row.error) == ("sim1", "ssh", True, False, None)
    assert row.gpu_count == 8 and row.gpus_total_mib == 8 * 97887 and row.gpus_busy == 0
    assert row.age_s is not None and 0 <= row.age_s < 5
    assert row.running_requests is None and row.kv_cache_usage is None  # not read on this path
    assert row.to_json()["source"] == "ssh"


async def test_a_running_engine_adds_its_own_figures(tmp_path: Path) -> None:

    hosts = SimHosts(tmp_path)
    host = hosts(sim_host_config("sim1"))
    service = host.config.services[0]
    try:
        await host.services.start(service.unit_for(service.layouts[0]))  # EP8

        async def ready():  # the simulated start at time scale 0.03 takes a few seconds
            return (await host.probes[service.name].probe()).status == "ready"

        await await_for(ready, "EP8 to be ready", timeout_s=60)
        row = await ssh_row(host)
    finally:
        await hosts.close()
    assert row.up is True and row.gpus_busy == 8
    assert row.running_requests == 0 and row.waiting_requests == 0  # read, so 0, not None
    assert row.kv_cache_usage is not None and 0 <= row.kv_cache_usage < 1
    assert row.generation_tokens_per_s is not None and row.engine_age_s is not None


async def test_an_unreachable_host_is_a_down_row_not_an_exception() -> None:
    service = sim_host_config().services[0]
    cfg = HostConfig(name="gone", address="127.0.0.1", port=free_port(), connect_timeout_s=2.0,
                     known_hosts="/dev/null", ssh_config="/dev/null", services=(service,))
    host = build_remote_host(cfg)
    try:
        row = await ssh_row(host, timeout_s=10)
    finally:
        await host.close()
    assert (row.up, row.stale, row.gpus_used_mib) == (False, True, None)
    assert row.error and "\n" not in row.error
