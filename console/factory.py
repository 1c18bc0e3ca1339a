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
    """Every host of the config, in file order, each knowing the others its services span (`peers`).
    Connections open lazily, so a down host blocks nothing."""
    hosts = [open_host(h, state_dir=state_dir, stop_units_on_close=stop_units_on_close) for h in config.hosts]
    by_name = {h.name: h for h in hosts}
    for host in hosts:
        host.peers.update({name: by_name[name] for name in _node_names(host.config) if name != host.name})
    return hosts


def open_host_in(config: ConsoleConfig, cfg: HostConfig, *, state_dir: Path | None = None) -> Host:
    """The host of one config entry, with the other hosts its services span opened beside it (and closed
    with it): what a headless command on one host needs to act on a service over several."""
    host = open_host(cfg, state_dir=state_dir)
    for name in _node_names(cfg):
        peer_cfg = config.host(name)
        if name != cfg.name and peer_cfg is not None and name not in host.peers:
            peer = open_host(peer_cfg, state_dir=state_dir)
            host.peers[name] = peer
            host.closers.append(peer.close)
    return host


def _node_names(cfg: HostConfig) -> list[str]:
    return [n for s in cfg.services if s.cluster is not None for n in s.cluster.nodes]
