"""What PyTorch's c10d says when the rendezvous of a process group fails: the store's timeouts, its port.

The rank that hosts the TCPStore (global rank 0, on node 0) waits for every rank to connect and gives up
with `DistStoreError: Timed out after 601 seconds waiting for clients. 8/16 clients joined.` (timeout + 1
s, as the store rounds it); a rank that never reaches the store gives up with `DistNetworkError: The client
socket has timed out after 600000ms while trying to connect to (HOST, PORT).`; a rank that reached it but
waits for one that never came fails fetching the NCCL unique id. The timeout is the process group's:
`--dist-timeout` (SGLang) or `--distributed-timeout-seconds` (vLLM), else torch's NCCL default, 600 s.
"""

from __future__ import annotations

import time

from console.sim.logfmt import SITE

DEFAULT_PG_TIMEOUT_S = 600
_C10D = f"{SITE}/torch/distributed"

#: init_process_group down to the TCPStore, as Python prints the frames.
RENDEZVOUS_FRAMES = [
    f'  File "{_C10D}/c10d_logger.py", line 81, in wrapper',
    "    return func(*args, **kwargs)",
    f'  File "{_C10D}/c10d_logger.py", line 95, in wrapper',
    "    func_return = func(*args, **kwargs)",
    f'  File "{_C10D}/distributed_c10d.py", line 1710, in init_process_group',
    "    store, rank, world_size = next(rendezvous_iterator)",
    f'  File "{_C10D}/rendezvous.py", line 233, in _tcp_rendezvous_handler',
    "    store = _create_c10d_store(",
    f'  File "{_C10D}/rendezvous.py", line 191, in _create_c10d_store',
    "    return TCPStore(",
]


def store_timeout(timeout_s: float, joined: int, world: int) -> str:
    """The store host's error once not every rank connected in time."""
    return (f"torch.distributed.DistStoreError: Timed out after {int(timeout_s) + 1} seconds waiting for "
            f"clients. {joined}/{world} clients joined.")


def connect_timeout(timeout_s: float, host: str, port: int) -> str:
    """A rank's error once it could not reach the store in time."""
    return (f"torch.distributed.DistNetworkError: The client socket has timed out after {int(timeout_s * 1000)}ms "
            f"while trying to connect to ({host}, {port}).")


def unique_id_timeout(rank: int) -> str:
    """A rank's error once it reached the store but the others never came."""
    return (f"torch.distributed.DistBackendError: [{rank}] is setting up NCCL communicator and retrieving "
            f"ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket "
            "Timeout")


def port_taken(port: int) -> str:
    """The store host's error when another program holds the rendezvous port."""
    return (f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            f"address. port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")


def collective_timeout_lines(rank: int, *, timeout_ms: int, ran_ms: int, seq: int = 1) -> list[str]:
    """What c10d's NCCL watchdog writes (to stderr, bare) when a collective never completes on `rank`."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
    work = (f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) "
            f"ran for {ran_ms} milliseconds before timing out.")
    return [
        f"[rank{rank}]:[E{stamp} 1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: {work}",
        f"[rank{rank}]:[E{stamp} 1 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
        f"Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught "
        f"collective operation timeout: {work}",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ]
