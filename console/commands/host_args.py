"""What the headless commands share: loading the config, picking a host and a service, printing JSON."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from console.config import ConsoleConfig, HostConfig, ServiceConfig
from console.errors import UsageError


def add_host_option(parser: argparse.ArgumentParser, *, service: bool = True) -> None:
    parser.add_argument("--host", metavar="H", help="the host (default: the only one)")
    if service:
        parser.add_argument("--service", metavar="S", help="the service (default: the host's only one)")


def load(args: argparse.Namespace) -> ConsoleConfig:
    """hosts.toml as --config names it, or found in the usual places."""
    from console.config import load_config

    return load_config(getattr(args, "config", None))


def pick_host(config: ConsoleConfig, name: str | None) -> HostConfig:
    """The host named by --host, or the only one.

    Raises:
        UsageError: no such host, or several and none named.
    """
    found = config.host(name)
    if found is None:
        names = ", ".join(h.name for h in config.hosts) or "none"
        if name is None:
            raise UsageError(f"{config.path}: several hosts; name one with --host (hosts: {names})")
        raise UsageError(f"{config.path}: no host {name!r} (hosts: {names})")
    return found


def pick_host_for_layout(config: ConsoleConfig, name: str | None, layout: str) -> HostConfig:
    """The host named by --host; else the only one; else the only one that has `layout` (the demo
    cluster's `switch EP8` finds `demo`, `switch TP2` finds `demo-vllm`).

    Raises:
        UsageError: no host has the layout; as `pick_host`, when several hosts have it.
    """
    if name is None and len(config.hosts) > 1:
        having = [h for h in config.hosts if any(s.layout(layout) for s in h.services)]
        if len(having) == 1:
            return having[0]
        if not having:  # no host has it: the layout is what is wrong, not the missing --host
            known = sorted({lc.name for h in config.hosts for s in h.services for lc in s.layouts})
            raise UsageError(f"{config.path}: no host has a layout {layout!r} (layouts: {', '.join(known) or 'none'})")
    return pick_host(config, name)


def pick_service(host: HostConfig, name: str | None) -> ServiceConfig:
    """The service named by --service, or the host's only one."""
    found = host.service(name)
    if found is None:
        names = ", ".join(s.name for s in host.services) or "none"
        if name is None:
            raise UsageError(
                f"host {host.name}: several services; name one with --service (services: {names})"
            )
        raise UsageError(f"host {host.name}: no service {name!r} (services: {names})")
    return found


def pick_target(args: argparse.Namespace, *, layout: str | None = None) -> tuple[ConsoleConfig, HostConfig, ServiceConfig]:
    """The config, host and service a command acts on, from `--config`, `--host` and `--service`.

    With `layout`, a cluster of several hosts picks the only host that has it (`switch TP2`).

    Raises:
        UsageError: as `pick_host` and `pick_service`.
    """
    config = load(args)
    host = pick_host_for_layout(config, args.host, layout) if layout else pick_host(config, args.host)
    return config, host, pick_service(host, args.service)


def finite(value: Any) -> Any:
    """The value with every NaN and infinite float (a host's number) made None: JSON has neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def json_line(obj: dict[str, Any]) -> str:
    """One line of valid JSON (no `NaN` or `Infinity`: they are null)."""
    return json.dumps(finite(obj), separators=(", ", ": "), allow_nan=False)


def print_json(obj: dict[str, Any]) -> None:
    """One JSON line, flushed at once so scripts see events as they happen."""
    sys.stdout.write(json_line(obj) + "\n")
    sys.stdout.flush()
