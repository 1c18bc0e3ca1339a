"""What both simulated engines run on when a service spans hosts: where each node sits and which ranks it
runs, the TCP rendezvous and the keep-alive connection between nodes, the stall watch behind the engines'
watchdogs, PyTorch's rendezvous errors, and the NCCL RAS client socket with its STATUS report.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.sim.cluster.link import RendezvousPortTaken, RendezvousTimeout
from console.sim.cluster.liveness import DEAD, OK, UNRESPONSIVE, Liveness
from console.sim.cluster.node import FAIL_OOM_KILL, FAIL_RENDEZVOUS, ClusterNode, job_comms
from console.sim.cluster.ras import DEFAULT_RAS_ADDR, RAS_ADDR_ENV, RasServer
from console.sim.cluster.ras_report import RasComm, RasProcess, status_report
from console.sim.cluster.topology import NodePlace, node_ranks, split_host_port
from console.sim.cluster.torch_text import (
    DEFAULT_PG_TIMEOUT_S,
    RENDEZVOUS_FRAMES,
    collective_timeout_lines,
    connect_timeout,
    port_taken,
    store_timeout,
    unique_id_timeout,
)

__all__ = [
    "DEAD",
    "DEFAULT_PG_TIMEOUT_S",
    "DEFAULT_RAS_ADDR",
    "FAIL_OOM_KILL",
    "FAIL_RENDEZVOUS",
    "OK",
    "RAS_ADDR_ENV",
    "RENDEZVOUS_FRAMES",
    "UNRESPONSIVE",
    "ClusterNode",
    "Liveness",
    "NodePlace",
    "RasComm",
    "RasProcess",
    "RasServer",
    "RendezvousPortTaken",
    "RendezvousTimeout",
    "collective_timeout_lines",
    "connect_timeout",
    "job_comms",
    "node_ranks",
    "port_taken",
    "split_host_port",
    "status_report",
    "store_timeout",
    "unique_id_timeout",
]
