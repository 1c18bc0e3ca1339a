"""The real vLLM on tb1 that tests/integration/test_real_vllm*.py drive: its units, service and fixture."""

from __future__ import annotations

import os

import pytest
from remote_helpers import bed_host_config

from console.config import UNIT_PER_LAYOUT, LayoutConfig, ServiceConfig
from console.domain.layout import Layout
from console.domain.values import Engine
from console.hosts.remote import build_remote_host
from console.ops.audit import AuditLog

HOST = "tb1"
UNITS = {"TP1": "vllm-tiny@tp1.service", "LONGCTX": "vllm-tiny@max-model-len.service",
         "SMALLKV": "vllm-tiny@kv-too-small.service", "PP2": "vllm-tiny@pp2.service"}
SHAPES = {"TP1": Layout(tp=1), "LONGCTX": Layout(tp=1), "SMALLKV": Layout(tp=1), "PP2": Layout(pp=2)}
START_TIMEOUT_S = 240  # a cold start on two loaded cores; healthy in 20-40 s


@pytest.fixture(scope="module")
def real_vllm(testbed, tmp_path_factory):
    """tb1 with the real vLLM bound in (tests/hosts/vllm/install.sh); its units stopped at the end."""
    have = testbed.ssh(HOST, "test -x /opt/vllm/venv/bin/python && test -f /opt/models/vllm-tiny/tiny-moe/config.json",
                       check=False)  # fmt: skip
    if have.returncode != 0:
        reason = "the real vLLM is not installed: run tests/hosts/vllm/install.sh (CI's .ci/run does)"
        if os.environ.get("SERVE_CONSOLE_REQUIRE_TESTBED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    state = {"audit": AuditLog(tmp_path_factory.mktemp("real-vllm") / "audit.sqlite3"), "timings": []}
    yield testbed, state
    state["audit"].close()
    testbed.ssh(HOST, "systemctl stop 'vllm-tiny@*'; systemctl reset-failed", check=False)
    print("\nreal vLLM: " + "; ".join(state["timings"]))


def tiny_service() -> ServiceConfig:
    layouts = tuple(LayoutConfig(name, SHAPES[name], unit=unit) for name, unit in UNITS.items())
    return ServiceConfig(name="tiny", engine=Engine.VLLM, url="http://127.0.0.1:8000", mapping=UNIT_PER_LAYOUT,
                         layouts=layouts, health_via="ssh")  # fmt: skip


def open_host(bed):
    return build_remote_host(bed_host_config(bed, HOST, gpus="none", services=(tiny_service(),)))
