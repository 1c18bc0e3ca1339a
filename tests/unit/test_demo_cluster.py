"""The packaged demo moves a service off a port that something else holds, and says so."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from console.config import demo_config_path, load_config
from console.sim.demo_cluster import load_demo_config


def test_busy_demo_port_moves_to_a_free_one() -> None:
    packaged = urlsplit(load_config(demo_config_path()).hosts[0].services[0].url)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is not held
        try:
            holder.bind((packaged.hostname, packaged.port))
        except OSError:
            pass  # already held by another program: the point of the feature
        else:
            holder.listen()
        config, notes = load_demo_config()
        moved = urlsplit(config.hosts[0].services[0].url)
        assert moved.hostname == packaged.hostname
        assert moved.port != packaged.port
        assert len(notes) == 1 and f"port {packaged.port} is in use" in notes[0]
        with socket.socket() as probe:  # the new port is really free
            probe.bind((moved.hostname, moved.port))
