"""One Host per hosts.toml entry, whatever its transport."""

from __future__ import annotations

from pathlib import Path

from console.config import ConsoleConfig, HostConfig
from console.errors import UsageError
from console.hosts.base import Host


def open_host(cfg: HostConfig, *, state_dir: Path | None = None, stop_units_on_close: bool = False) -> Host:
    """Build the Host for one config entry; "sim" hosts keep their units under `state_dir`.

    With `stop_units_on_close`, closing a "sim" host stops its units (for `--demo`: no orphans).

    Raises:
        UsageError: for an unknown transport.
    """
    if cfg.transport == "sim":
        from console.hosts.state_dir import state_dir as default_state_dir
        from console.sim.host import build_sim_host

        return build_sim_host(cfg, state_dir or default_state_dir(), stop_units_on_close=stop_units_on_close)
    if cfg.transport in ("ssh", "local"):
        from console.hosts.remote import build_remote_host

        return build_remote_host(cfg)
    raise UsageError(f"host {cfg.name}: unknown transport {cfg.transport!r}")


def open_hosts(
    config: ConsoleConfig, *, state_dir: Path | None = None, stop_units_on_close: bool = False
) -> list[Host]:
    """Every host of the config, in file order. Connections open lazily, so a down host blocks nothing."""
    return [open_host(h, state_dir=state_dir, stop_units_on_close=stop_units_on_close) for h in config.hosts]
