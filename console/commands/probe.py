"""`serve-console probe`: the serving benchmark against a service's running layout, after READY."""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.host_args import add_host_option, json_line, pick_target, print_json
from console.commands.probe_args import add_probe_options, options_from_args


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="benchmark the running layout (TTFT, TPOT, ITL, tok/s) as vllm bench serve does",
        description="Load the service's engine with streaming OpenAI requests, once its health probe "
        "says ready (through the SSH forward when health_via = \"ssh\"), and print one summary per "
        "concurrency in sglang.bench_serving's layout. Figures use vllm bench serve's definitions. "
        "A probe loads a production server: refused under read-only. Every level is stored "
        "(see `serve-console results`). Exit 0 every request succeeded, 1 otherwise, 2 usage.",
    )
    add_host_option(parser)
    add_probe_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON line per level (vLLM's result keys)")
    parser.add_argument("--output-file", metavar="F", help="also append each level's JSON line to F")
    # SUPPRESS: a global --readonly given before the subcommand is not overwritten by this default
    parser.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS,
                        help="refuse, as every action is refused read-only")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.ops.explore import build_prompts
    from console.ops.readonly import require_writable

    options = options_from_args(args)
    config, host_cfg, service = pick_target(args)
    require_writable(config, getattr(args, "readonly", False), f"probe {host_cfg.name}/{service.name}")
    build_prompts(options, 1)  # a bad dataset is a usage error before the server is touched
    return asyncio.run(_probe(host_cfg, service, options, args))


class _Printer:
    """Each level as it ends: bench_serving's summary, or one JSON line; and to --output-file."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.json = args.json
        self.file = None
        if args.output_file:
            from console.errors import UsageError

            try:
                self.file = open(args.output_file, "a", encoding="utf-8")  # closed in close()
            except OSError as exc:
                raise UsageError(f"{args.output_file}: cannot write: {exc.strerror or exc}") from None

    def __call__(self, result) -> None:
        from console.commands.probe_output import summary_lines

        line = result.to_json()
        if self.json:
            print_json(line)
        else:
            sys.stdout.write("\n".join(summary_lines(result)) + "\n")
            sys.stdout.flush()
        if self.file is not None:
            self.file.write(json_line(line) + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


async def _probe(host_cfg, service, options, args: argparse.Namespace) -> int:
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.explore import ResultsStore, probe_service

    printer = _Printer(args)
    host = open_host(host_cfg)
    audit = open_audit()
    store = ResultsStore.beside(audit)
    try:
        results = await probe_service(host, service, options, audit=audit, store=store, on_result=printer)
    finally:
        printer.close()
        store.close()
        audit.close()
        await host.close()
    ok = bool(results) and all(r.summary.failed == 0 and r.summary.completed > 0 for r in results)
    return 0 if ok else 1
