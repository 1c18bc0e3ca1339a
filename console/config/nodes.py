"""A service that spans several hosts: `nodes = ["gpu-node-1", "gpu-node-2"]`, head first.

The service is written once, under its head host; the other nodes are hosts of the same file (a host
that is only another host's node needs no services of its own). Each layout says over how many of the
nodes it runs (`nodes = 2`; 1 by default). The console writes each node's rank, the head's address and
port (and the interface NCCL and Gloo must use) where the node's unit reads them: the service's env file
or drop-in, or for units of their own (unit-per-layout, template) a node file the unit names with
`EnvironmentFile=-` (docs/multinode.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from console.config.fields import Table, value_repr
from console.config.model import ClusterConfig, HostConfig, ServiceConfig
from console.domain.layout import gpus_used
from console.errors import ConfigError

NODE_KEYS = ("nodes", "dist_port", "head_address", "nic", "node_env_file", "ras_port")
#: Where a unit-per-layout or template service's node file goes by default (`{service}` is its name).
NODE_ENV_FILE = "/etc/serve-console/{service}.node.env"
#: One interface name as Linux allows it (IFNAMSIZ 16, no slash or whitespace).
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
_ADDRESS = re.compile(r"(?!-)[A-Za-z0-9.:_-]{1,253}")
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def parse_cluster(table: Table, service: str, host: str, env_file_path) -> ClusterConfig | None:
    """The service's `nodes` and their rendezvous settings, or None for a one-host service.

    Args:
        table: the service's table.
        service: its name.
        host: the host it is written under, which must be the head (`nodes[0]`).
        env_file_path: the loader's check of an absolute path on a host (for `node_env_file`).
    """
    if not table.has("nodes"):
        for key in NODE_KEYS[1:]:
            if table.has(key):
                raise table.error(key, "only for a service with nodes = [...] (a service over several hosts)")
        return None
    raw = table.data["nodes"]
    if not isinstance(raw, list) or len(raw) < 2 or not all(isinstance(n, str) for n in raw):
        raise table.error("nodes", f"expected a list of two or more host names, head first, got {value_repr(raw)}")
    nodes: tuple[str, ...] = tuple(raw)
    for name in nodes:
        if not _NODE_NAME.fullmatch(name):
            raise table.error("nodes", f"{value_repr(name)} is not a host name")
    if len(set(nodes)) != len(nodes):
        raise table.error("nodes", "a host is listed twice")
    if nodes[0] != host:
        raise table.error("nodes", f"the head (the first node) is the host the service is written under, "
                          f"{host!r}, not {nodes[0]!r}")
    default_file = NODE_ENV_FILE.format(service=service)
    return ClusterConfig(
        nodes=nodes,
        dist_port=table.integer("dist_port", 5000, minimum=1, maximum=65535) or 5000,
        head_address=table.text("head_address", pattern=_ADDRESS, describe="a host name or address"),
        nic=table.text("nic", pattern=_IFNAME, describe="a network interface name (at most 15 characters)"),
        node_env_file=env_file_path(table, "node_env_file") or default_file,
        ras_port=table.integer("ras_port", 28028, minimum=0, maximum=65535),
        line=table.locator.line(table.path + ("nodes",)),
    )


def check_clusters(hosts: Sequence[HostConfig], label: str) -> None:
    """What one service's table cannot check alone: its nodes are hosts of the file, and its layouts fit.

    Raises:
        ConfigError: a node that is no host, a layout over more nodes than listed, a world that does not
            split evenly over its nodes or needs more GPUs on a node than the node has.
    """
    by_name = {h.name: h for h in hosts}
    for host in hosts:
        for service in host.services:
            if service.cluster is None:
                for layout in service.layouts:
                    if layout.nodes > 1:
                        raise ConfigError(label, layout.line, f"hosts.{host.name}.services.{service.name}: layout "
                                          f"{layout.name!r} says nodes = {layout.nodes}; list them: nodes = [...]")
                continue
            _check_service(service, host, by_name, label)


def _check_service(service: ServiceConfig, host: HostConfig, by_name: dict[str, HostConfig], label: str) -> None:
    cluster = service.cluster
    assert cluster is not None
    where = f"hosts.{host.name}.services.{service.name}"
    for name in cluster.nodes:
        if name not in by_name:
            raise ConfigError(label, cluster.line, f"{where}.nodes: {name!r} is not a host of this file "
                              f"(hosts: {', '.join(by_name)})")
        if by_name[name].transport != host.transport:
            raise ConfigError(label, cluster.line, f"{where}.nodes: {name!r} is a {by_name[name].transport} host, "
                              f"the head a {host.transport} one: a service spans hosts of one kind")
    for layout in service.layouts:
        if layout.nodes > len(cluster.nodes):
            raise ConfigError(label, layout.line, f"{where}: layout {layout.name!r} runs on {layout.nodes} nodes; "
                              f"only {len(cluster.nodes)} are listed")
        world = gpus_used(layout.layout, service.engine)
        if world % layout.nodes:
            raise ConfigError(label, layout.line, f"{where}: layout {layout.name!r} has {world} ranks, which do "
                              f"not split evenly over {layout.nodes} nodes")
        per_node = world // layout.nodes
        for name in cluster.nodes[: layout.nodes]:
            count = by_name[name].gpu_count
            if count is not None and per_node > count:
                raise ConfigError(label, layout.line, f"{where}: layout {layout.name!r} needs {per_node} GPUs "
                                  f"on each of its {layout.nodes} nodes; {name} has {count}")


def with_nodes(hosts: Sequence[HostConfig]) -> tuple[HostConfig, ...]:
    """Each host with the other hosts' services it is a node of (`node_of`), then with the other hosts
    of every service it heads or is a node of (`peer_hosts`, head first)."""
    node_of: dict[str, list[ServiceConfig]] = {}
    peers: dict[str, list[str]] = {}
    for host in hosts:
        for service in host.services:
            nodes = service.cluster.nodes if service.cluster is not None else ()
            for name in nodes:
                if name != host.name:
                    node_of.setdefault(name, []).append(service)
                peers.setdefault(name, []).extend(n for n in nodes if n != name)
    linked = [replace(h, node_of=tuple(node_of.get(h.name, ()))) for h in hosts]
    by_name = {h.name: h for h in linked}
    return tuple(
        replace(h, peer_hosts=tuple(by_name[n] for n in dict.fromkeys(peers.get(h.name, ())))) for h in linked
    )
