"""Free loopback ports for tests, never from the kernel's ephemeral range.

A port the kernel hands out for outgoing connections (net.ipv4.ip_local_port_range) can be taken by
any connect() between our pick and the server's bind, and a client can even connect to itself on it;
so a test port comes from below (or above) that range. Each pytest-xdist worker draws from its own
residue class, so two workers of one session never pick the same port; a port this process handed out
is not handed out again until every other one has been; and the packaged demo's own ports are skipped (a developer's demo may run).
"""

from __future__ import annotations

import os
import random
import re
import socket
from pathlib import Path

FLOOR = 10_000  # below: well-known and registered services more likely to be running


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _demo_ports() -> set[int]:
    from console.config import demo_config_path

    text = demo_config_path().read_text()
    return {int(m) for m in re.findall(r"(?::|port *= *)(\d{4,5})\b", text)}


def _candidates() -> list[int]:
    low, high = ephemeral_range()
    ports = [*range(FLOOR, min(low, 65536)), *range(max(high + 1, FLOOR), 65536)]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker) if worker.isdigit() else 0
    skip = _demo_ports()
    return [p for p in ports if p % count == index % count and p not in skip]


_POOL: list[int] = []
_GIVEN: set[int] = set()


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))  # any address: 127.0.0.1 and 127.0.0.2 listeners both conflict
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port nothing listens on now, outside the ephemeral range, not given out before here."""
    if not _POOL:  # the first call, or every port handed out once: start over
        _GIVEN.clear()
        _POOL.extend(_candidates())
        random.shuffle(_POOL)
    while _POOL:
        port = _POOL.pop()
        if _bindable(port):
            _GIVEN.add(port)
            return port
    raise RuntimeError("no free port left outside the ephemeral range")
