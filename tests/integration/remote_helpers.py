"""Shared bits of the remote-host integration tests: host configs for the test hosts, async waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from console.config import HostConfig


def bed_host_config(bed, name: str = "tb1", **overrides: object) -> HostConfig:
    """A HostConfig that reaches test host `name` through the testbed's ssh_config alias."""
    values: dict[str, object] = {"name": name, "ssh_config": str(bed.ssh_config), "connect_timeout_s": 5.0}
    values.update(overrides)
    return HostConfig(**values)  # type: ignore[arg-type]


async def wait_until(
    predicate: Callable[[], object | Awaitable[object]], timeout_s: float, what: str, interval_s: float = 0.05
) -> object:
    """Poll a sync or async predicate until truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)
