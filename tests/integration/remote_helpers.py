"""Shared bits of the remote-host integration tests: host configs for the test hosts, async waiting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from waiting import await_for

from console.config import HostConfig


def bed_host_config(bed, name: str = "tb1", **overrides: object) -> HostConfig:
    """A HostConfig that reaches test host `name` through the testbed's ssh_config alias."""
    values: dict[str, object] = {"name": name, "ssh_config": str(bed.ssh_config), "connect_timeout_s": 5.0}
    values.update(overrides)
    return HostConfig(**values)  # type: ignore[arg-type]


async def wait_until(
    predicate: Callable[[], object | Awaitable[object]], timeout_s: float, what: str, interval_s: float = 0.05
) -> object:
    """Poll a sync or async predicate until truthy; fail naming `what` after `timeout_s` (scaled)."""
    return await await_for(predicate, what, timeout_s=timeout_s, interval_s=interval_s)
