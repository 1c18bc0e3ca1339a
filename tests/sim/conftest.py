"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest
from sim_fixtures import SimHosts


@pytest.fixture
async def sim_hosts(tmp_path):
    """Simulated hosts under the test's tmp_path, closed (their engines stopped) after the test."""
    hosts = SimHosts(tmp_path)
    yield hosts
    await hosts.close()


@pytest.fixture
def ep8_up(sim_hosts):
    """A factory: `await ep8_up(...)` builds a simulated host (sim_hosts' arguments) and switches it to EP8,
    ready; what many tests start from."""
    from console.ops.switch.orchestrate import switch_layout

    async def up(cfg=None, **kwargs):
        host = sim_hosts(cfg, **kwargs)
        result = await switch_layout(host, None, "EP8", timeout_s=60)
        assert result.outcome == "ready", result.reason
        return host

    return up
