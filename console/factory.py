"""One Host per hosts.toml entry, whatever its transport."""

from __future__ import annotations

from pathlib import Path

from console.config import ConsoleConfig, HostConfig
from console.errors import UsageError
from console.hosts.base import Host


def open_host(
    cfg: HostConfig, *, state_dir: Path | None = None, stop_units_on_close: bool = False, peers: bool = True
) -> Host:
    """Build the Host for one config entry; "sim" hosts keep their units under `state_dir`.

    With `stop_units_on_close`, closing a "sim" host stops its units (for `--demo`: no orphans). With
    `peers`, the other hosts its services span (`HostConfig.peer_hosts`) are opened beside it, in
    `Host.peers`, and closed with it: a command on one host acts on a service over several.

    Raises:
        UsageError: for an unknown transport.
    """
    host = _build(cfg, state_dir, stop_units_on_close)
    for peer_cfg in cfg.peer_hosts if peers else ():
        peer = _build(peer_cfg, state_dir, stop_units_on_close)
        host.peers[peer.name] = peer
        host.closers.append(peer.close)
    return host


def open_hosts(
    config: ConsoleConfig, *, state_dir: Path | None = None, stop_units_on_close: bool = False
) -> list[Host]:
    """Every host of the config, in file order, each knowing the others its services span (`peers`).
    Connections open lazily, so a down host blocks nothing."""
    hosts = [_build(h, state_dir, stop_units_on_close) for h in config.hosts]
    by_name = {h.name: h for h in hosts}
    for host in hosts:
        host.peers.update({p.name: by_name[p.name] for p in host.config.peer_hosts if p.name in by_name})
    return hosts


def _build(cfg: HostConfig, state_dir: Path | None, stop_units_on_close: bool) -> Host:
    if cfg.transport == "sim":
        from console.hosts.state_dir import state_dir as default_state_dir
        from console.sim.host import build_sim_host

        return build_sim_host(cfg, state_dir or default_state_dir(), stop_units_on_close=stop_units_on_close)
    if cfg.transport in ("ssh", "local"):
        from console.hosts.remote import build_remote_host

        return build_remote_host(cfg)
    raise UsageError(f"host {cfg.name}: unknown transport {cfg.transport!r}")
