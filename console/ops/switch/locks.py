"""The host locks that keep two consoles from changing one service at once.

A switch holds `switch-<service>`; an explore holds `explore-<service>` for its whole sweep, and each of
its switches holds `switch-<service>` too. A switch that is not an explore's own also takes
`explore-<service>` for its duration, so a plain switch from another console (or another terminal)
is refused while an explore runs, instead of landing between two of its layouts and spoiling the
measurement; and an explore is refused while a plain switch runs. A plain probe holds
`explore-<service>` too (ops/explore/probe.py), so a probe and an explore, or a probe and a switch,
never overlap. The locks live on the host
(hosts/base.py HostLock), so they hold across processes and machines.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from console.config import ServiceConfig
from console.hosts.base import Host, LockBusy


def lock_name(service: ServiceConfig) -> str:
    """The lock every switch of `service` holds."""
    return f"switch-{service.name}"


def explore_lock_name(service: ServiceConfig) -> str:
    """The lock an explore of `service` holds for its sweep, and a plain switch for its own run."""
    return f"explore-{service.name}"


class ServiceBusy(Exception):
    """Another console is changing this service; the message says who (a switch or an explore)."""


@contextlib.asynccontextmanager
async def switch_locks(host: Host, service: ServiceConfig, *, within_explore: bool = False) -> AsyncIterator[None]:
    """Hold the locks a switch needs (the explore lock too, unless the switch is an explore's own).

    Raises:
        ServiceBusy: an explore or another switch of the service runs on the host.
    """
    # The switch lock first, so a second plain switch is told of the switch it met. Both locks are
    # tried, never waited for, so the opposite order an explore takes them in cannot deadlock. A service
    # over several hosts is locked on every one of them (a console on any node sees the switch).
    nodes = [host] + [host.peers[n] for n in (service.cluster.nodes if service.cluster else ()) if n in host.peers]
    async with contextlib.AsyncExitStack() as held:
        for node in nodes:
            try:
                await held.enter_async_context(node.lock(lock_name(service)))
            except LockBusy as exc:
                raise ServiceBusy(f"another switch of {service.name} is running on {node.name} ({exc})") from None
        if not within_explore:
            try:
                await held.enter_async_context(host.lock(explore_lock_name(service)))
            except LockBusy as exc:
                raise ServiceBusy(f"an explore or a probe of {service.name} is running on {host.name} ({exc}); "
                                  "wait for it, or stop it first") from None
        yield


__all__ = ["ServiceBusy", "explore_lock_name", "lock_name", "switch_locks"]
