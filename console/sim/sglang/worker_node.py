"""SGLang on a node other than node 0, and which ranks of any node write the batch lines.

A node with `--node-rank` >= 1 runs only its schedulers: once they are ready its launcher starts SGLang's
dummy health server on `--host:--port` (engine.py, `launch_dummy_health_check_server`: `/health`,
`/health_generate` and `/ping` answer 200 with an empty body, `/metrics` only with `--enable-metrics`;
uvicorn runs at log level warning, so it logs no access lines) and waits on its schedulers. It serves no
API and never prints `The server is fired up and ready to roll!`.

`Prefill batch` and `Decode batch` lines come from every scheduler whose attention-TP rank is 0
(`current_scheduler_metrics_enabled()`, attn_tp_rank == 0): one per data-parallel group and pipeline
stage. Node 0 runs the requests, so it relays each batch line to the other nodes over the cluster link and
each logs it on its own such ranks: with PP across nodes, `[PP1 TP0] Decode batch.` is node 1's
heartbeat; with TP16 over 2x8, node 1 has no such rank and stays silent while serving.
"""

from __future__ import annotations

import errno

from aiohttp import web

from console.domain.layout import Layout
from console.sim.cluster import ClusterNode
from console.sim.logfmt import Rank
from console.sim.process import EngineExit
from console.sim.sglang import failures
from console.sim.sglang.logfmt import EngineLog


def batch_logging_ranks(ranks: list[Rank], layout: Layout) -> list[Rank]:
    """The ranks that log batches: attention-TP rank 0 of each DP group and PP stage."""
    tp = max(layout.tp, 1)
    attn_tp = tp // layout.dp if layout.dp_attention and layout.dp > 1 else tp
    return [rank for rank in ranks if rank.tp_rank % max(attn_tp, 1) == 0]


class DummyHealthServer:
    """SGLang's dummy health check server of a node that serves no API."""

    def __init__(self, enable_metrics: bool) -> None:
        self.app = web.Application()
        for path in ("/health", "/health_generate", "/ping"):
            self.app.router.add_get(path, self.ok)
        if enable_metrics:
            self.app.router.add_get("/metrics", self.metrics)
        self.runner: web.AppRunner | None = None

    async def ok(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(self, request: web.Request) -> web.Response:
        # No scheduler on such a node records metrics (only attn-TP rank 0 does; none here with plain TP).
        return web.Response(text="", content_type="text/plain", charset="utf-8")

    async def start(self, host: str, port: int) -> None:
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError:
            await runner.cleanup()
            raise
        self.runner = runner

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


async def serve_as_worker_node(log: EngineLog, cluster: ClusterNode, ranks: list[Rank], layout: Layout, *,
                               host: str, port: int, enable_metrics: bool) -> DummyHealthServer:
    """Start the dummy health server and log node 0's batch lines; returns the server, to be stopped.

    Raises:
        EngineExit: the port is taken (uvicorn's Errno 98), exit 1.
    """
    loggers = batch_logging_ranks(ranks, layout)
    cluster.link.on_relay = lambda message: [log.log(message, rank) for rank in loggers]
    log.log(f"Starting dummy health check server at {host}:{port}")
    server = DummyHealthServer(enable_metrics)
    try:
        await server.start(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            log.uvicorn("ERROR", failures.port_in_use_line(host, port))
        else:
            log.uvicorn("ERROR", f"[Errno {exc.errno}] {exc.strerror}")
        raise EngineExit(1) from None
    return server
