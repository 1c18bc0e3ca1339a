"""`python -m console.sim.sglang`: a simulated SGLang server, a real process on a simulated GPU host.

It prints SGLang's start-up lines, fills the GPU ledger as it "loads" each rank's weights tensor by
tensor (from the fit predictor's load plan), dies with the real CUDA OOM traceback when a tensor does
not fit, binds its HTTP port only after the CUDA graphs (as SGLang does), warms up through its own
HTTP API, and serves OpenAI-compatible completions at the layout's speed. SIGTERM stops it cleanly
(exit 0) at any point; the ledger file goes with it.

Only stdlib, aiohttp and console.domain are imported: the test hosts run it under Debian's python3.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
from collections.abc import Sequence

from console.domain.fit import ModelSpec, load_model_spec
from console.domain.layout import check_layout
from console.domain.values import Engine
from console.errors import UsageError
from console.sim.engine_args import EngineArgs
from console.sim.generation import Generator
from console.sim.ledger import ProcLedger, ensure_inventory, read_inventory
from console.sim.metrics import Metrics
from console.sim.process import EngineExit, SimServer
from console.sim.sglang import failures
from console.sim.sglang.args import parse_engine_args
from console.sim.sglang.logfmt import EngineLog
from console.sim.sglang.request_log import SglangHttp
from console.sim.sglang.startup import SglangStartup
from console.sim.sglang.worker_node import batch_logging_ranks, serve_as_worker_node
from console.sim.stall import stall_from

PROCESS_NAME = "sglang::scheduler"
WARMUP_PROMPT = "The capital city of France is"


def _layout_problem(args: EngineArgs, spec: ModelSpec) -> str | None:
    # Too few GPUs is not checked here: like SGLang, the engine finds out in set_device.
    layout = args.layout
    if (layout.tp * layout.pp) % args.nnodes:  # server_args.py, check_server_args
        return "tp_size must be divisible by number of nodes"
    if layout.dp > 1 and args.nnodes > 1 and not layout.dp_attention:
        return "multi-node data parallel is not supported unless dp attention!"
    return check_layout(layout, Engine.SGLANG, num_experts=spec.num_experts or None)


class SglangServer(SimServer):
    """One SGLang run: start-up story, HTTP server, warm-up, serving, shutdown."""

    process_name = PROCESS_NAME

    def __init__(self, args: EngineArgs, spec: ModelSpec, config: dict) -> None:
        super().__init__(args, spec, config)
        self.log = EngineLog()

    async def shutdown(self) -> None:
        """uvicorn's shutdown lines, when the server was up (a worker node's runs at log level warning)."""
        if self.http is None or self.args.node_rank > 0:
            return
        self.log.uvicorn("INFO", "Shutting down")
        self.log.uvicorn("INFO", "Waiting for application shutdown.")
        self.log.uvicorn("INFO", "Application shutdown complete.")
        self.log.uvicorn("INFO", f"Finished server process [{os.getpid()}]")

    async def story(self) -> None:
        """Start-up, HTTP, warm-up, then serve until cancelled; raises EngineExit on a failure."""
        startup = SglangStartup(self.args, self.spec, self.config, self.log, self.ledger, self.clock)
        cluster = self.cluster = startup.cluster
        report = await startup.run()
        if not cluster.place.is_head:
            self.http = await serve_as_worker_node(self.log, cluster, startup.ranks, self.args.layout,
                                                   host=self.args.host, port=self.args.port,
                                                   enable_metrics=self.args.enable_metrics)
            await asyncio.Event().wait()  # the launcher waits on its schedulers
        metrics = Metrics()
        loggers = batch_logging_ranks(startup.ranks, self.args.layout)

        def batch_log(message: str) -> None:
            for rank in loggers:
                self.log.log(message, rank)
            cluster.link.relay(message)

        generator = Generator(self.args.layout, metrics, report.max_total_num_tokens, startup.on_load,
                              batch_log=batch_log, step_gate=cluster.link.step if cluster.spans_hosts else None)
        options = dict(self.args.passthrough)
        http = SglangHttp(served_name=self.args.served_model_name, model_path=self.args.model_path,
                          context_len=report.context_len, generator=generator, metrics=metrics, log=self.log,
                          metrics_enabled=self.args.enable_metrics, request_log=self.log,
                          request_level=int(options["log_requests_level"]) if options.get("log_requests") else None)
        await startup.at(startup.t + 0.3)
        self.log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        self.log.uvicorn("INFO", "Waiting for application startup.")
        self.log.uvicorn("INFO", "Application startup complete.")
        if self.args.fail == "port":
            self.log.uvicorn("ERROR", failures.port_in_use_line(self.args.host, self.args.port))
            raise EngineExit(1)
        try:
            await http.start(self.args.host, self.args.port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                self.log.uvicorn("ERROR", f"[Errno {exc.errno}] {exc.strerror}")
                raise EngineExit(1) from None
            self.log.uvicorn("ERROR", failures.port_in_use_line(self.args.host, self.args.port))
            raise EngineExit(1) from None
        self.http = http
        self.log.uvicorn("INFO", f"Uvicorn running on http://{self.args.host}:{self.args.port} "
                                 "(Press CTRL+C to quit)")
        await self.warm_up(startup)
        http.ready = True
        self.log.log("The server is fired up and ready to roll!")
        if (stall := stall_from(self.args.fail)) is not None:
            stall.on_engage.append(lambda: startup.show_stall(stall.kind))
            stall.on_end.append(startup.stall_ended)
            generator.stall = http.stall = stall
            stall.arm()
        # Serve until stopped, or until a batch waits on a lost node past the first of the timeouts.
        watchdog_s = min(self.args.watchdog_timeout_s, cluster.timeout_s)
        await cluster.watch_stall(lambda: generator.running > 0, watchdog_s)
        await self.watchdog_fires(startup)

    async def watchdog_fires(self, startup: SglangStartup) -> None:
        """The head's schedulers give up on a batch that made no progress: SGLang's watchdog (300 s), or
        c10d's NCCL watchdog when the process group's timeout is the shorter; then the launcher goes."""
        cluster, args = startup.cluster, self.args
        if cluster.timeout_s < args.watchdog_timeout_s:
            timeout_ms = int(cluster.timeout_s * 1000)
            for rank in startup.ranks:
                for line in failures.nccl_watchdog_lines(rank.index, timeout_ms=timeout_ms,
                                                         ran_ms=timeout_ms + startup.rng.randint(5, 95)):
                    self.log.raw(line)
        else:
            configured = dict(args.passthrough).get("watchdog_timeout", 300)
            for rank in startup.ranks:
                for line in failures.watchdog_lines(rank.prefix, configured):
                    self.log.raw(line)
            await self.clock.sleep(5.0)  # "Wait for some time so that the parent process can print the error."
        self.log.log(failures.SIGQUIT_LINE)
        raise EngineExit(1)

    async def warm_up(self, startup: SglangStartup) -> None:
        """SGLang's warm-up thread: poll /get_model_info, then one short /generate, over real HTTP."""
        import aiohttp

        host = self.args.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        base = f"http://{'[' + host + ']' if ':' in host else host}:{self.args.port}"
        await startup.at(startup.t + 1.0)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/get_model_info") as resp:
                await resp.read()
            payload = {"text": WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            async with session.post(f"{base}/generate", json=payload) as resp:
                await resp.read()
                if resp.status != 200:
                    self.log.log(f"Initialization failed. warmup error: HTTP {resp.status}")
                    raise EngineExit(1)


def _read_config(args: EngineArgs) -> tuple[ModelSpec, dict]:
    spec = load_model_spec(args.config_path)
    return spec, json.loads(args.config_path.read_text(encoding="utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = parse_engine_args(argv)
    log = EngineLog()
    try:
        spec, config = _read_config(args)
    except UsageError as exc:
        log.raw(f"Error: {exc}")
        return 1
    problem = _layout_problem(args, spec)
    if problem is not None:
        log.log("Traceback (most recent call last):")
        log.raw(f'  File "{failures.SITE}/sglang/srt/server_args.py", line 612, in check_server_args')
        log.raw(f"AssertionError: {problem}")
        return 1
    if args.ignored:
        log.log(f"WARNING: the simulated engine accepts and ignores {' '.join(args.ignored)}")
    try:
        if not read_inventory(args.ledger_dir):
            ensure_inventory(args.ledger_dir, args.gpu_count, args.gpu_total_mib, args.gpu_name)
        probe = ProcLedger(args.ledger_dir, name=PROCESS_NAME)
        probe.flush()
    except OSError as exc:
        log.raw(f"Error: cannot write the simulated GPU ledger in {args.ledger_dir}: {exc.strerror or exc}")
        return 1
    return asyncio.run(SglangServer(args, spec, config).run())


if __name__ == "__main__":
    sys.exit(main())
