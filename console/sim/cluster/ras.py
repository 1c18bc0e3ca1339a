"""The NCCL RAS client socket of a simulated node: NCCL_RAS_ADDR, the client protocol, the STATUS report.

NCCL >= 2.24 starts a RAS thread in every process at NCCL initialisation; each listens for clients on
NCCL_RAS_ADDR (default localhost:28028) with SO_REUSEADDR and SO_REUSEPORT, so every process of a host
binds it and any one answers for the whole job (src/ras/client_support.cc, rasClientInitSocket). A node
here is one process, which binds once, after the rendezvous (that is when NCCL initialises). Hosts that
share one machine (the demo's, the tests') give each node its own NCCL_RAS_ADDR. NCCL_RAS_ENABLE=0 turns
it off. The protocol (src/ras/client.cc, the `ncclras` client): lines ending in newline;
`CLIENT PROTOCOL <n>` -> `SERVER PROTOCOL 2`; `TIMEOUT <s>` -> `OK`; `STATUS` or `VERBOSE STATUS` -> the
report, then the server closes the connection; anything else -> `ERROR: Unknown command <line>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence

from console.sim.cluster.ras_report import RasComm, RasProcess, status_report
from console.sim.cluster.topology import split_host_port

RAS_ADDR_ENV, RAS_ENABLE_ENV = "NCCL_RAS_ADDR", "NCCL_RAS_ENABLE"
DEFAULT_RAS_ADDR = "localhost:28028"
SERVER_PROTOCOL = 2
MAX_LINE = 1024


class RasServer:
    """Answers `ncclras` clients for the job this node belongs to.

    Args:
        processes: every rank's process with its liveness now, as this node sees them.
        comms: the job's communicators.
    """

    def __init__(self, processes: Callable[[], Sequence[RasProcess]], comms: Sequence[RasComm]) -> None:
        self.processes, self.comms = processes, comms
        self._server: asyncio.AbstractServer | None = None

    async def start(self, env: Mapping[str, str] | None = None) -> bool:
        """Listen on NCCL_RAS_ADDR; False when RAS is off or the address cannot be had (NCCL goes on)."""
        env = os.environ if env is None else env
        if env.get(RAS_ENABLE_ENV, "1") == "0":
            return False
        try:
            host, port = split_host_port(env.get(RAS_ADDR_ENV) or DEFAULT_RAS_ADDR)
            host = "127.0.0.1" if host == "localhost" else host  # NCCL takes the first address it resolves
            self._server = await asyncio.start_server(self._client, host=host, port=port, reuse_address=True,
                                                      reuse_port=True, limit=MAX_LINE * 4)
        except (OSError, ValueError):
            return False  # NCCL logs this at INFO level only ("RAS failed to establish ...")
        return True

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ValueError, asyncio.LimitOverrunError):
            while raw := await reader.readline():
                command = raw.decode("utf-8", "replace").rstrip("\r\n")
                word = command.lower()
                if word.startswith("client protocol "):
                    writer.write(f"SERVER PROTOCOL {SERVER_PROTOCOL}\n".encode())
                elif word.startswith("timeout "):
                    writer.write(self._timeout_answer(command[len("timeout "):]).encode())
                elif word in ("status", "verbose status"):
                    for piece in status_report(self.processes(), self.comms, verbose=word.startswith("verbose")):
                        writer.write(piece.encode())
                        await writer.drain()
                    break
                else:
                    writer.write(f"ERROR: Unknown command {command}\n".encode())
                await writer.drain()
        writer.close()

    @staticmethod
    def _timeout_answer(value: str) -> str:
        try:
            ok = float(value) >= 0
        except ValueError:
            ok = False
        return "OK\n" if ok else f"ERROR: Invalid timeout value {value}\n"
