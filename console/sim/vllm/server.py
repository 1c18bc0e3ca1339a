"""`python -m console.sim.vllm serve MODEL [flags]`: a simulated vLLM server on a simulated GPU host.

It prints vLLM 0.11's start-up lines with their process prefixes, builds each worker's model tensor by
tensor into the GPU ledger (dying with PyTorch's CUDA OOM, `EngineCore failed to start.` and the API
server's `Engine core initialization failed` when a tensor does not fit), reads the checkpoint, sizes
the KV cache from `--gpu-memory-utilization`, captures CUDA graphs, then serves the OpenAI API on port
8000 with `/health` and `vllm:` metrics, logging its throughput every 10 s while there is traffic.
SIGTERM stops it cleanly (exit 0) at any point; the ledger file goes with it.

Only stdlib, aiohttp and console.domain are imported: the test hosts run it under Debian's python3.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import sys
from collections.abc import Sequence

from console.domain.fit import ModelSpec, load_model_spec
from console.domain.layout import check_layout
from console.domain.values import Engine
from console.errors import UsageError
from console.sim.cluster import collective_timeout_lines
from console.sim.engine_args import EngineArgs
from console.sim.generation import Generator
from console.sim.ledger import ProcLedger, ensure_inventory, read_inventory
from console.sim.metrics import Metrics
from console.sim.process import EngineExit, SimServer
from console.sim.stall import stall_from
from console.sim.vllm import failures as vllm_failures
from console.sim.vllm import multinode
from console.sim.vllm.args import FAIL_NO_TOKEN, parse_vllm_args
from console.sim.vllm.http_api import ROUTES, VllmHttp
from console.sim.vllm.logfmt import VllmLog
from console.sim.vllm.metrics_text import vllm_metrics
from console.sim.vllm.startup import VllmStartup

PROCESS_NAME = "VLLM::EngineCore"
STATS_INTERVAL_S = 10.0
#: How long /health answers 503 after the engine core died, before the API server exits (about 2.9 s seen).
ENGINE_DEAD_503_S = 2.9
#: Set: `--fail engine_dead` waits for SIGUSR1 (a test's `kill -9` of the core) instead of dying 3 s after start.
DIE_ON_SIGNAL_ENV = "SERVE_CONSOLE_SIM_DIE_ON_SIGNAL"


async def _never() -> None:
    """A forward step that never begins (`--fail no_token`)."""
    await asyncio.Event().wait()


def port_taken(host: str, port: int) -> bool:
    """vLLM binds its socket before it starts the engine: is the address already held?"""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


class SimVllm(SimServer):
    """One vLLM run: the shared run loop (signals, clean stop, ledger), vLLM's story."""

    process_name = PROCESS_NAME

    def __init__(
        self, args: EngineArgs, spec: ModelSpec, config: dict, non_default: dict[str, object]
    ) -> None:
        super().__init__(args, spec, config)
        self.non_default = non_default
        self.log = VllmLog()
        self.startup: VllmStartup | None = None

    async def shutdown(self) -> None:
        """A requested stop's lines, when the server was up: vLLM 0.32 aborts its engine client, whose
        output handler then logs an EngineDeadError traceback, and uvicorn says goodbye. The console must
        read none of that as a failure (tests/fixtures/vllm-real/tp1-start.log ends the same way)."""
        if self.http is None or self.startup is None:
            return
        log, core = self.log, self.startup.cores[0]
        log.info(log.api, "launcher.py:254", "[shutdown] API server: shutdown triggered")
        log.info(log.api, "launcher.py:270", "[shutdown] API server: stopping engine client mode=abort timeout=0s")
        log.info(core, "core.py:1499", "[shutdown] EngineCore: exiting busy loop")
        vllm_failures.output_handler_failed(log)
        log.info(log.api, "launcher.py:279", "[shutdown] API server: engine client stopped")
        self.uvicorn_goodbye()

    def uvicorn_goodbye(self) -> None:
        for message in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.",
                        f"Finished server process [{os.getpid()}]"):  # fmt: skip
            self.log.uvicorn("INFO", message)

    async def story(self) -> None:
        """Start-up, API server, then serve until cancelled; raises EngineExit on a failure."""
        args, log = self.args, self.log
        if not args.headless and (args.fail == "port" or port_taken(args.host, args.port)):
            vllm_failures.port_in_use(log, args.host, args.port)
            raise EngineExit(1)
        startup = VllmStartup(args, self.spec, self.config, log, self.ledger, self.clock, self.non_default)
        self.startup = startup
        cluster = self.cluster = startup.cluster
        report = await startup.run()
        if args.headless:
            await asyncio.Event().wait()  # the executor watches its workers; it serves nothing
        metrics = vllm_metrics()

        step_gate = cluster.link.step if cluster.spans_hosts else None
        if args.fail == FAIL_NO_TOKEN:
            step_gate = _never  # the scheduler is stuck: requests are accepted and wait for ever
        generator = Generator(args.layout, metrics, report.max_total_num_tokens, startup.on_load,
                              step_gate=step_gate)
        http = VllmHttp(
            served_name=args.served_model_name,
            model_path=args.model_path,
            context_len=report.context_len,
            generator=generator,
            metrics=metrics,
            log=log,
            cache_info=startup.cache_info(report),
        )
        await startup.at(startup.t + 1.5)
        log.info(log.api, "entry.py:136", "Supported tasks: ['generate']")
        log.info(log.api, "entry.py:140", f"Starting vLLM server on http://{args.host}:{args.port}")
        log.info(log.api, "launcher.py:186", "Available routes are:")
        for path, method in ROUTES:
            log.info(log.api, "launcher.py:195", f"Route: {path}, Methods: {method}")
        killed = _kill_signal() if args.fail == "engine_dead" else None  # in place before /health answers
        try:
            await http.start(args.host, args.port)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                vllm_failures.port_in_use(log, args.host, args.port)
            else:
                log.raw(None, f"OSError: [Errno {exc.errno}] {exc.strerror}")
            raise EngineExit(1) from None
        self.http = http
        log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        log.uvicorn("INFO", "Waiting for application startup.")
        log.uvicorn("INFO", "Application startup complete.")
        if args.fail == "engine_dead":
            await (killed.wait() if killed is not None else startup.at(startup.t + 3.0))
            await self.engine_dies(startup, http)
        if (stall := stall_from(args.fail)) is not None:
            stall.on_engage.append(lambda: startup.show_stall(stall.kind))
            stall.on_end.append(startup.stall_ended)
            generator.stall = stall
            stall.arm()
        stats = asyncio.create_task(self.log_stats(metrics, report.max_total_num_tokens))
        try:  # serve until stopped, or until a step waits on a lost node past the first of the timeouts
            await cluster.watch_stall(lambda: generator.running > 0, min(args.watchdog_timeout_s, cluster.timeout_s))
        finally:
            stats.cancel()
        await self.step_never_returned(startup, http)

    async def step_never_returned(self, startup: VllmStartup, http: VllmHttp) -> None:
        """A step waited on a lost node: the engine core's RPC to its workers times out (300 s), or c10d's
        NCCL watchdog aborts the local workers first when the process group's timeout is the shorter."""
        cluster, core = startup.cluster, startup.cores[0]
        if cluster.timeout_s < self.args.watchdog_timeout_s:
            timeout_ms = int(cluster.timeout_s * 1000)
            for rank in startup.ranks:
                for line in collective_timeout_lines(rank.index, timeout_ms=timeout_ms,
                                                     ran_ms=timeout_ms + startup.rng.randint(5, 95)):
                    self.log.raw(None, line)
            multinode.worker_died(self.log, core, startup.ranks[0].index)
        else:
            multinode.rpc_timed_out(self.log, core)
        await self.engine_dies(startup, http)

    async def engine_dies(self, startup: VllmStartup, http: VllmHttp) -> None:
        """The engine core dies, as under `kill -9`: /health answers 503 for about 3 s, then the API server
        shuts down and exits 0 (so systemd sees a clean exit, not a failure; tests/fixtures/vllm-real/kill9-*.txt)."""
        http.engine_alive = False
        vllm_failures.engine_core_died(self.log, startup.cores[0])
        await asyncio.sleep(ENGINE_DEAD_503_S)  # wall time: the server's own shutdown does not scale
        self.uvicorn_goodbye()
        self.http = None
        await http.stop()
        raise EngineExit(0)

    async def log_stats(self, metrics: Metrics, kv_tokens: int) -> None:
        """vLLM's periodic stats line while tokens flow, and one all-zero line after (loggers.py logs at DEBUG
        when this and the previous interval's throughputs are all 0: a stall falls as silent as idle)."""
        last_prompt, last_gen, was_busy = metrics.prompt_tokens_total, metrics.generation_tokens_total, False
        while True:
            await asyncio.sleep(STATS_INTERVAL_S)
            prompt_rate = (metrics.prompt_tokens_total - last_prompt) / STATS_INTERVAL_S
            gen_rate = (metrics.generation_tokens_total - last_gen) / STATS_INTERVAL_S
            last_prompt, last_gen = metrics.prompt_tokens_total, metrics.generation_tokens_total
            busy = bool(prompt_rate or gen_rate)
            if busy or was_busy:
                self.log.info(
                    self.log.api,
                    "loggers.py:335",
                    f"Engine 000: Avg prompt throughput: "
                    f"{prompt_rate:.1f} tokens/s, Avg generation throughput: {gen_rate:.1f} tokens/s, "
                    f"Running: {metrics.num_running_reqs} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                    f"{100 * metrics.token_usage:.1f}%, Prefix cache hit rate: 0.0%",
                )
            was_busy = busy


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args, non_default = parse_vllm_args(argv)
    log = VllmLog()
    try:
        spec = load_model_spec(args.config_path)
        config = json.loads(args.config_path.read_text(encoding="utf-8"))
    except (UsageError, OSError, ValueError) as exc:
        log.raw(None, f"Error: {exc}")
        return 1
    problem = check_layout(args.layout, Engine.VLLM, num_experts=spec.num_experts or None)
    world = args.layout.tp * args.layout.pp
    if problem is None and world % args.nnodes:  # the multiprocess executor's own check
        log.raw(None, f"AssertionError: global world_size ({world}) must be divisible by nnodes_within_dp "
                      f"({args.nnodes}). ")
        return 1
    if problem is not None:
        log.raw(None, "Traceback (most recent call last):")
        log.raw(None, '  File "/usr/local/lib/python3.12/dist-packages/vllm/config/parallel.py", line 412, '
                      "in __post_init__")  # fmt: skip
        log.raw(None, f"ValueError: {problem}")
        return 1
    if args.ignored:
        log.line(
            log.api,
            "WARNING",
            "argparse_utils.py:173",
            f"the simulated engine accepts and ignores {' '.join(args.ignored)}",
        )
    try:
        if not read_inventory(args.ledger_dir):
            ensure_inventory(args.ledger_dir, args.gpu_count, args.gpu_total_mib, args.gpu_name)
        ProcLedger(args.ledger_dir, name=PROCESS_NAME).flush()
    except OSError as exc:
        log.raw(None, f"Error: cannot write the simulated GPU ledger in {args.ledger_dir}: {exc.strerror or exc}")
        return 1
    return asyncio.run(SimVllm(args, spec, config, non_default).run())


if __name__ == "__main__":
    sys.exit(main())


def _kill_signal() -> asyncio.Event | None:
    """Set at SIGUSR1 when DIE_ON_SIGNAL_ENV is set: the engine core's death, when a test says."""
    if not os.environ.get(DIE_ON_SIGNAL_ENV):
        return None
    killed = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, killed.set)
    return killed
