"""The simulated vLLM as a real systemd unit on a test host, over SSH: TP4 comes up with its phases
streamed from the journal and its /metrics read through the SSH port forward; TP2 (forced) dies with
vLLM's CUDA OOM while the model is built, is named within a second, and is rolled back to TP4."""

from __future__ import annotations

from pathlib import Path

import pytest
from remote_helpers import bed_host_config

from console.config import UNIT_PER_LAYOUT, LayoutConfig, ServiceConfig
from console.domain.layout import parse_layout
from console.domain.values import Engine, FindingClass, Phase
from console.hosts.remote import build_remote_host
from console.ops.audit import AuditLog
from console.ops.engine_status import engine_figures
from console.ops.switch.events import FAILED, READY, PhaseEvent
from console.ops.switch.orchestrate import switch_layout

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "console" / "sim" / "models" / "Qwen--Qwen3-235B-A22B-FP8.json"
MODEL_DIR = "/opt/models/qwen3-235b-fp8"
UNITS = {"TP4": "vllm-qwen3-tp4.service", "TP2": "vllm-qwen3-tp2.service"}


def unit_file(layout: str) -> str:
    """A unit as an operator writes one for `vllm serve`, running the simulated engine (the test host's
    inventory: eight 96 GB cards)."""
    flags = f"-tp {layout.removeprefix('TP')}"
    return f"""[Unit]
Description=vLLM Qwen3-235B-A22B-FP8 {layout} (simulated)
After=network.target

[Service]
Type=simple
Environment=PYTHONPATH=/opt/serve-console PYTHONUNBUFFERED=1
EnvironmentFile=-/etc/serve-console/sim.env
ExecStart=/usr/bin/python3 -m console.sim.vllm serve {MODEL_DIR} {flags} --host 127.0.0.1 --port 8000 \\
    --gpu-count 8 --gpu-total-mib 97887 --gpu-name "NVIDIA RTX PRO 6000 Blackwell Server Edition" \\
    --ledger-dir /var/lib/serve-console-sim/ledger --time-scale 0.05
Restart=no
KillMode=control-group
"""


@pytest.fixture
def vllm_units(clean_testbed):
    """tb1 with the two vLLM units and the model's config.json; both removed again at the end."""
    bed = clean_testbed
    bed.write_file("tb1", f"{MODEL_DIR}/config.json", QWEN.read_text())
    for layout, unit in UNITS.items():
        bed.write_file("tb1", f"/etc/systemd/system/{unit}", unit_file(layout))
    bed.write_file("tb1", "/etc/serve-console/sim.env", "SERVE_CONSOLE_SIM_TIME_SCALE=0.03\n")
    bed.ssh("tb1", "systemctl daemon-reload")
    yield bed
    units = " ".join(UNITS.values())
    bed.ssh(
        "tb1",
        f"systemctl stop {units}; rm -f {' '.join('/etc/systemd/system/' + u for u in UNITS.values())}; "
        f"rm -rf {MODEL_DIR}; systemctl daemon-reload; systemctl reset-failed",
        check=False,
    )


def qwen_service() -> ServiceConfig:
    layouts = tuple(LayoutConfig(name, parse_layout(name), unit=unit) for name, unit in UNITS.items())
    return ServiceConfig(
        name="qwen3",
        engine=Engine.VLLM,
        url="http://127.0.0.1:8000",
        mapping=UNIT_PER_LAYOUT,
        layouts=layouts,
        model_config=QWEN,
        health_via="ssh",
    )


async def test_vllm_story_over_ssh(vllm_units, tmp_path):
    service = qwen_service()
    host = build_remote_host(bed_host_config(vllm_units, "tb1", gpus="nvidia-smi", services=(service,)))
    audit = AuditLog(tmp_path / "audit.sqlite")
    events: list = []
    try:
        tp4 = await switch_layout(host, "qwen3", "TP4", audit=audit, on_event=events.append, timeout_s=240)
        assert tp4.outcome == READY, tp4.reason
        phases = [e.phase for e in events if isinstance(e, PhaseEvent) and not e.rollback]
        order = list(Phase)
        assert {Phase.LOADING_WEIGHTS, Phase.KV_CACHE, Phase.CUDA_GRAPHS, Phase.HTTP_UP} <= set(phases), (
            phases
        )
        assert phases == sorted(phases, key=order.index), phases  # streamed in start-up order
        assert (await host.probes["qwen3"].probe()).status == "ready"
        figures, why = await engine_figures(host, service, running=True, interval_s=0.5)
        assert figures is not None, why  # vllm: metrics, read through the SSH port forward
        assert figures.running_requests == 0 and figures.kv_cache_usage == 0

        events.clear()
        oom = await switch_layout(
            host, "qwen3", "TP2", force=True, audit=audit, on_event=events.append, timeout_s=240
        )
        assert oom.outcome == FAILED, oom.reason
        assert oom.failure is not None and oom.failure.cls == FindingClass.CUDA_OOM
        assert oom.failure.oom is not None and oom.failure.oom.gpu in (0, 1)
        assert f"{oom.failure.oom.total_bytes / 2**30:.2f}" == "94.97"
        assert oom.detected_after_s is not None  # its figure: bench/detect_latency.py
        assert oom.rollback is not None and oom.rollback.layout == "TP4" and oom.rollback.outcome == READY
        print(
            f"\nvLLM over SSH: TP4 ready in {tp4.elapsed_s:.1f} s; TP2 OOM detected after "
            f"{oom.detected_after_s:.3f} s; rolled back to TP4 in {oom.rollback.elapsed_s:.1f} s"
        )
    finally:
        audit.close()
        await host.close()
