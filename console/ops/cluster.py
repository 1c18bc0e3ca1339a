"""A service over several hosts as the ops layer sees it: its nodes as open Hosts, the head's address,
and each node's place in a layout."""

from __future__ import annotations

from console.config import HostConfig, LayoutConfig, ServiceConfig
from console.domain.nodes import NodePlace
from console.errors import UsageError
from console.hosts.base import Host


def node_hosts(host: Host, service: ServiceConfig) -> list[Host]:
    """The service's nodes as Hosts, head first.

    Raises:
        UsageError: a node was not opened beside the head (the host was opened without its peers).
    """
    assert service.cluster is not None
    out = []
    for name in service.cluster.nodes:
        node = host if name == host.name else host.peers.get(name)
        if node is None:
            raise UsageError(f"{host.name}/{service.name} spans {', '.join(service.cluster.nodes)}, and {name} "
                             "is not open beside it")
        out.append(node)
    return out


def head_address(service: ServiceConfig, head: HostConfig) -> str:
    """Where the other nodes reach the head: `head_address`, else the head host's own address (a
    simulated head serves on this machine's 127.0.0.1)."""
    assert service.cluster is not None
    if service.cluster.head_address:
        return service.cluster.head_address
    return "127.0.0.1" if head.transport == "sim" else head.address or head.name


def places(service: ServiceConfig, layout: LayoutConfig, head: HostConfig) -> list[NodePlace]:
    """Each node's place in `layout`, for the nodes it runs on."""
    assert service.cluster is not None
    address = head_address(service, head)
    return [NodePlace(r, layout.nodes, address, service.cluster.dist_port) for r in range(layout.nodes)]
