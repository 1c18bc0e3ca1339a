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
