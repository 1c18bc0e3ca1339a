"""gpus = "dcgm": dcgm-exporter's default counters parsed, the last Xid as a finding, and the exporter
read directly (local hosts) or through the host's SSH connection."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aiohttp import web
from fleet_text import EXPORT, parse
from http_stub import http_stub
from ssh_fake_server import start_fake_sshd

from console.config import HostConfig, ServiceConfig
from console.domain.triage.xid import xid_findings
from console.domain.values import Engine, FindingClass, GpuSample, GpuSnapshot
from console.errors import ConfigError
from console.hosts.gpus.dcgm import DcgmSource, parse_dcgm
from console.hosts.remote import build_remote_host


def test_default_counters_become_gpu_samples() -> None:
    gpus, note = parse_dcgm(EXPORT)
    assert note is None
    first, second = gpus
    assert first == GpuSample(index=0, uuid="GPU-aa", name="NVIDIA H100 80GB HBM3", total_mib=81559,
                              used_mib=77000, util_pct=97, temp_c=71, pci_bus_id="00000000:18:00.0",
                              power_w=612.25, xid=None)
    assert (second.used_mib, second.total_mib, second.power_w, second.xid) == (559, 81559, 71.5, 79)


def test_missing_counters_are_none_not_zero_and_garbage_is_a_note() -> None:
    only_used = 'DCGM_FI_DEV_FB_USED{gpu="3"} 1200\nDCGM_FI_DEV_GPU_UTIL{gpu="x"} 5\n'
    (gpu,), note = parse_dcgm(only_used)
    assert (gpu.index, gpu.used_mib, gpu.total_mib, gpu.util_pct, gpu.xid) == (3, 1200, None, None, None)
    assert note is None
    gpus, note = parse_dcgm("node_load1 0.5\n")
    assert gpus == [] and "no DCGM_FI_DEV_* GPU series" in (note or "")
    gpus, note = parse_dcgm('DCGM_FI_DEV_FB_USED{gpu="0" 12\n')
    assert gpus == [] and (note or "").startswith("dcgm-exporter: unreadable metrics")


def test_the_last_xid_is_a_finding_with_its_meaning() -> None:
    gpus, _ = parse_dcgm(EXPORT)
    (finding,) = xid_findings(GpuSnapshot(taken_at=100.0, gpus=tuple(gpus)))
    assert finding.cls == FindingClass.GPU_XID and not finding.fatal and finding.ts == 100.0
    assert finding.summary == ("GPU 1 reported Xid 79 (GPU has fallen off the bus); "
                               "the GPU needs a reset before it serves again")
    assert xid_findings(None) == [] and xid_findings(GpuSnapshot(taken_at=0.0)) == []


@pytest.fixture
async def exporter():
    """A dcgm-exporter stand-in on loopback: /metrics answers EXPORT, /missing 404."""
    async def metrics(request):
        return web.Response(text=EXPORT, content_type="text/plain")

    async with http_stub({"/metrics": metrics}) as port:
        yield port


def _host(**kw) -> HostConfig:
    service = ServiceConfig(name="llm", engine=Engine.SGLANG, url="http://127.0.0.1:30000")
    return HostConfig(name="gpu-07", services=(service,), **kw)


async def test_local_host_reads_the_exporter_directly(exporter: int) -> None:
    host = build_remote_host(_host(transport="local", gpus="dcgm", dcgm_url=f"http://127.0.0.1:{exporter}/metrics"))
    try:
        snapshot = await host.gpus.sample()
        assert snapshot.error is None and [g.used_mib for g in snapshot.gpus] == [77000, 559]
    finally:
        await host.close()
    missing = DcgmSource(f"http://127.0.0.1:{exporter}/missing", host="gpu-07")
    try:
        error = (await missing.sample()).error or ""
        assert error.endswith("answered HTTP 404") and error.startswith("gpu-07: dcgm-exporter at")
    finally:
        await missing.close()


async def test_ssh_host_reads_the_exporter_through_its_connection(tmp_path: Path, exporter: int) -> None:
    sshd = await start_fake_sshd(tmp_path)
    cfg = dataclasses.replace(sshd.host_config(), gpus="dcgm", dcgm_url=f"http://127.0.0.1:{exporter}/metrics")
    host = build_remote_host(cfg)
    try:
        snapshot = await host.gpus.sample()
        assert snapshot.error is None and snapshot.gpus[1].xid == 79
        assert ["direct-tcpip", "127.0.0.1", str(exporter)] in sshd.commands  # not a direct connection
    finally:
        await host.close()
        await sshd.stop()


async def test_refused_exporter_is_an_error_snapshot() -> None:
    from fleet_prometheus import free_port

    source = DcgmSource(f"http://127.0.0.1:{free_port()}/metrics", host="gpu-07", timeout_s=2)
    try:
        snapshot = await source.sample()
        assert snapshot.gpus == () and "connection refused (is dcgm-exporter running?)" in (snapshot.error or "")
    finally:
        await source.close()


def test_config_gpus_dcgm_per_host() -> None:
    host = parse(host='gpus = "dcgm"').hosts[0]
    assert (host.gpus, host.dcgm_url) == ("dcgm", "http://127.0.0.1:9400/metrics")
    assert parse(host='gpus = "dcgm"\ndcgm_url = "http://127.0.0.1:9500/metrics"').hosts[0].dcgm_url.endswith(":9500/metrics")
    with pytest.raises(ConfigError, match=r'hosts.toml:3: hosts.gpu-07.dcgm_url: only with gpus = "dcgm"'):
        parse(host='dcgm_url = "http://127.0.0.1:9400/metrics"')
    with pytest.raises(ConfigError, match="is not an http"):
        parse(host='gpus = "dcgm"\ndcgm_url = "ftp://x"')


def test_status_json_carries_the_xid_finding_and_gpu_figures() -> None:
    from console.ops.status import ServiceStatus

    gpus, _ = parse_dcgm(EXPORT)
    status = ServiceStatus(host="gpu-07", service="llm", engine="sglang", units=(), active_unit=None,
                           active_layout=None, health=None, gpus=GpuSnapshot(taken_at=5.0, gpus=tuple(gpus)),
                           taken_at=5.0)
    doc = status.to_json()
    assert doc["gpus"][0]["power_w"] == 612.25
    assert [g["xid"] for g in doc["gpus"]] == [None, 79] and doc["gpus"][0]["temp_c"] == 71
    (finding,) = doc["gpu_findings"]
    assert finding["class"] == "gpu_xid" and finding["fatal"] is False and "Xid 79" in finding["summary"]
