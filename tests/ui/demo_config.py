"""The packaged demo cluster on free loopback ports, for the UI tests that run the real app on it."""

from __future__ import annotations

import dataclasses

from ports import free_port


def demo_config_on_free_port():
    """The packaged demo cluster, each service moved to a free loopback port (tests run side by side)."""
    from console.config import demo_config_path, load_config, with_nodes

    config = load_config(demo_config_path())
    hosts = []
    for host in config.hosts:  # a port of its own per service: demo-vllm must not probe the Kimi engine
        services = tuple(dataclasses.replace(s, url=f"http://127.0.0.1:{free_port()}", cluster=None if s.cluster
                         is None else dataclasses.replace(s.cluster, dist_port=free_port(), ras_port=free_port()))
                         for s in host.services)  # fmt: skip
        hosts.append(dataclasses.replace(host, services=services))
    return dataclasses.replace(config, hosts=with_nodes(hosts))
