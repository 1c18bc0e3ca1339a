"""The fleet through a real Prometheus (Debian's package) holding a backfilled synthetic fleet.

The session fixture is `fleet_prometheus` (tests/fleet_prometheus.py): skipped with a reason where
`prometheus`/`promtool` are missing, unless SERVE_CONSOLE_REQUIRE_TESTBED=1 (CI), where it fails the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet_prometheus import GPU_TOTAL_MIB, fleet_prometheus_fixture  # noqa: F401 (the session fixture)

from console.config import FleetConfig, HostConfig, ServiceConfig
from console.domain.values import Engine
from console.errors import HostError
from console.hosts.endpoints.prometheus import PrometheusClient
from console.ops.fleet.rows import PrometheusFleet

REPO = Path(__file__).resolve().parents[2]


def _host(name: str, address: str | None = None) -> HostConfig:
    service = ServiceConfig(name="llm", engine=Engine.SGLANG, url="http://127.0.0.1:30000")
    return HostConfig(name=name, address=address, services=(service,))


async def _rows(url: str, at: float, hosts=(), **cfg) -> dict:
    fleet = PrometheusFleet(FleetConfig(prometheus=url, **cfg), hosts)
    try:
        return {r.host: r for r in await fleet.rows(at=at)}
    finally:
        await fleet.close()


async def test_every_host_and_figure_in_one_query(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    rows = await _rows(url, fleet.end)
    assert sorted(rows) == fleet.names  # hosts come from the label mapping, ports stripped
    for i in (0, 5, 8):  # ordinary hosts, SGLang and vLLM
        row, name = rows[fleet.names[i]], fleet.names[i]
        assert row.source == "prometheus" and row.up is True and not row.stale, name
        assert row.age_s == 0.0
        assert row.gpus_used_mib == sum(fleet.used_mib(i, g) for g in range(fleet.gpus))
        assert row.gpus_total_mib == fleet.gpus * GPU_TOTAL_MIB
        assert row.gpu_count == fleet.gpus
        assert row.gpus_busy == sum(1 for g in range(fleet.gpus) if fleet.used_mib(i, g) > 1024)
        assert row.running_requests == fleet.running(i) and row.waiting_requests == fleet.waiting(i)
        assert row.kv_cache_usage == pytest.approx(fleet.kv(i))
        assert row.generation_tokens_per_s == pytest.approx(fleet.tokens_per_s(i))
        assert (row.targets, row.targets_up) == (2, 2)
    assert rows[fleet.names[0]].gpus_busy == fleet.gpus - 1  # host 0's last GPU is idle


async def test_a_host_going_stale_shows_its_age_not_zeros(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    name = fleet.names[fleet.stale]
    before = (await _rows(url, fleet.end - fleet.stale_age_s - 60))[name]
    assert not before.stale and before.up is True and before.gpus_used_mib
    after = (await _rows(url, fleet.end))[name]
    assert after.stale and after.up is None  # no sample inside Prometheus's 5 min look-back
    assert after.age_s == pytest.approx(fleet.stale_age_s)  # from the seen subquery, to the sample
    figures = (after.gpus_used_mib, after.gpus_total_mib, after.gpus_busy, after.running_requests,
               after.kv_cache_usage, after.generation_tokens_per_s)
    assert figures == (None,) * 6  # missing, never zero


async def test_lagging_down_and_restarted_hosts(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    rows = await _rows(url, fleet.end, stale_after_s=60.0)
    lagging = rows[fleet.names[fleet.lagging]]
    assert lagging.stale and lagging.age_s == pytest.approx(120.0)
    assert lagging.gpus_used_mib is not None  # still inside the look-back: shown, marked stale
    assert lagging.generation_tokens_per_s is None  # no two samples in the rate window: not 0
    down = rows[fleet.names[fleet.down]]
    assert down.up is False and down.stale and (down.targets, down.targets_up) == (2, 1)
    assert down.gpus_age_s == 0.0 and down.engine_age_s == pytest.approx(600.0)
    assert down.running_requests is None and down.gpus_used_mib is not None
    # A restarted engine's counter drops to 0: rate() counts the reset, never a negative rate.
    # Samples at -60 -45 -30(reset) -15 0 s: increases 15, (reset), 15, 15 tok/s*s of 60 -> 0.75x.
    reset = rows[fleet.names[fleet.reset]]
    assert reset.generation_tokens_per_s == pytest.approx(0.75 * fleet.tokens_per_s(fleet.reset), rel=0.01)


async def test_ranks_of_a_replica_count_once_and_replicas_add_up(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    i = fleet.ranks  # 2 DP replicas x 2 TP ranks, every rank exporting its replica's figures
    row = (await _rows(url, fleet.end))[fleet.names[i]]
    assert (row.running_requests, row.waiting_requests) == (2 * fleet.running(i), 2 * fleet.waiting(i))
    assert row.generation_tokens_per_s == pytest.approx(2 * fleet.tokens_per_s(i))
    assert row.kv_cache_usage == pytest.approx(fleet.kv(i))


async def test_match_narrows_every_selector(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    row = (await _rows(url, fleet.end, match='job="dcgm"'))[fleet.names[0]]
    assert row.gpus_used_mib is not None and (row.targets, row.targets_up) == (1, 1)
    assert row.running_requests is None and row.engine_age_s is None  # no engine series match


async def test_label_mapping_to_configured_hosts(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    hosts = [_host("alpha", address=fleet.names[7]), _host(fleet.names[8]), _host("absent")]
    rows = await _rows(url, fleet.end, hosts)
    order = list(rows)
    assert order[:3] == ["alpha", fleet.names[8], "absent"]  # configured hosts first, in file order
    assert rows["alpha"].configured and rows["alpha"].running_requests == fleet.running(7)
    assert fleet.names[7] not in rows  # found through the host's address
    absent = rows["absent"]
    assert absent.stale and absent.age_s is None and absent.up is None and "no series" in (absent.error or "")
    assert not rows[fleet.names[0]].configured
    # A regex picks the host out of the label; series it does not match belong to no host.
    only_even = await _rows(url, fleet.end, host_regex=r"^(gpu-\d\d\d[02468])")
    assert sorted(only_even) == [n for n in fleet.names if int(n[-1]) % 2 == 0]


async def test_bad_query_and_unreachable_server_are_one_line_errors(fleet_prometheus) -> None:
    _fleet, url = fleet_prometheus
    client = PrometheusClient(url, headers={})
    try:
        with pytest.raises(HostError, match="query refused \\(bad_data\\)"):
            await client.query("sum by (")
    finally:
        await client.close()
    from fleet_prometheus import free_port

    dead = PrometheusClient(f"http://127.0.0.1:{free_port()}", headers={}, timeout_s=2)
    try:
        with pytest.raises(HostError) as err:
            await dead.query("up")
        assert "\n" not in str(err.value) and str(err.value).startswith("prometheus http://127.0.0.1:")
    finally:
        await dead.close()


def test_fleet_command_json_opens_no_ssh(fleet_prometheus, tmp_path: Path) -> None:
    fleet, url = fleet_prometheus
    # An SSH host at an address nothing listens on: the command must not try it.
    config = tmp_path / "hosts.toml"
    config.write_text(f"""
[fleet]
prometheus = "{url}"

[hosts.{fleet.names[0]}]
address = "192.0.2.1"
connect_timeout_s = 30
[hosts.{fleet.names[0]}.services.llm]
engine = "sglang"
url = "http://127.0.0.1:30000"
mapping = "template"
template = "sglang@.service"
layouts = ["TP8"]
""")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "console", "--config", str(config), "fleet", "--json",
                           "--at", str(fleet.end)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert time.monotonic() - started < 20  # a 30 s SSH connect timeout would show here
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1, proc.stderr  # some hosts are stale or down
    assert [row["host"] for row in lines] == fleet.names
    keys = ["host", "source", "up", "age_s", "gpus_used_mib", "gpus_total_mib", "gpus_busy",
            "running_requests", "kv_cache_usage", "generation_tokens_per_s"]
    assert list(lines[0])[: len(keys)] == keys
    assert lines[0]["source"] == "prometheus" and lines[0]["configured"] is True
    assert lines[fleet.stale]["stale"] is True and lines[fleet.stale]["gpus_used_mib"] is None
