"""`serve-console explore`: switch to each layout, probe it, compare, and end on the best one."""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.host_args import add_host_option, pick_target, print_json
from console.commands.probe_args import add_probe_options, options_from_args


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explore",
        help="switch to each layout, probe it, and leave the best one running",
        description="Layouts go fastest-predicted first; one whose predicted optimistic bound cannot beat the "
        "best measured so far is pruned (--all measures every one, in the order given). "
        "For each layout: fit preflight (predicted oom/invalid: skipped unless --include-oom), "
        "switch and wait for READY (a failed start is rolled back and triaged), probe each concurrency, "
        "record. Then switch to the best by --pick, or back with --return. Ctrl-C leaves a ready layout "
        "running; --resume goes on. Refused under read-only. Exit 0 when a layout was measured, 1 when "
        "none was, 2 usage, 130 interrupted.",
    )
    add_host_option(parser)
    parser.add_argument("--layouts", metavar="L1,L2|all", help='layouts in order, e.g. "TP8,PP8,EP8,TP4 EP2", or all')
    add_probe_options(parser, default_concurrency="1,16,64")
    parser.add_argument("--pick", default="throughput", metavar="RULE",
                        help="throughput (default: highest aggregate at the top concurrency), c1, or ttft-slo:MS")
    parser.add_argument("--include-oom", action="store_true", help="start layouts predicted oom or invalid too")
    parser.add_argument("--return", dest="return_to_start", action="store_true",
                        help="end on the layout that ran at the start, not the best")
    parser.add_argument("--all", dest="measure_all", action="store_true",
                        help="measure every layout in the order given: no ordering or pruning by prediction")
    parser.add_argument("--resume", action="store_true", help="go on with this service's unfinished explore")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds per switch (default 900)")
    parser.add_argument("--json", action="store_true", help="JSON lines: switch and probe events, then one result")
    # SUPPRESS: a global --readonly given before the subcommand is not overwritten by this default
    parser.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS,
                        help="refuse, as every action is refused read-only")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.errors import UsageError
    from console.ops.explore import ExploreOptions, build_prompts, parse_pick
    from console.ops.readonly import require_writable

    config, host_cfg, service = pick_target(args)
    require_writable(config, getattr(args, "readonly", False), f"explore {host_cfg.name}/{service.name}")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    opts = None
    if not args.resume:
        if not args.layouts:
            raise UsageError('explore: name the layouts with --layouts "TP8,EP8" (or all), or --resume')
        names = ([lc.name for lc in service.layouts] if args.layouts.strip() == "all"
                 else [n.strip() for n in args.layouts.split(",") if n.strip()])
        unknown = [n for n in names if service.layout(n) is None]
        if unknown or not names:
            known = ", ".join(lc.name for lc in service.layouts)
            raise UsageError(f"{host_cfg.name}/{service.name}: no layout {', '.join(unknown) or '?'} (layouts: {known})")
        probe = options_from_args(args)
        build_prompts(probe, 1)  # a bad dataset is a usage error before anything switches
        opts = ExploreOptions(tuple(names), probe, parse_pick(args.pick), args.include_oom, args.return_to_start,
                              args.timeout, by_prediction=not args.measure_all)  # fmt: skip
    return asyncio.run(_explore(host_cfg, service, opts, args))


class _Human:
    """Switch lines as `switch` prints them, one line per probe level and per layout, then a table."""

    def __init__(self, host: str, service: str) -> None:
        from console.commands.switch_output import HumanPrinter

        self.switch = HumanPrinter(host, service)

    def __call__(self, event) -> None:
        from console.domain.safe_text import shown
        from console.ops.explore import LayoutDone, ProbeResult

        if isinstance(event, ProbeResult):
            s = event.summary
            sys.stdout.write(f"  probe  {event.layout} c={s.concurrency}: {s.output_throughput:,.1f} tok/s, "
                             f"{_num(s.per_user_tokens_per_s)} tok/s/user, TTFT p50/p99 {_num(s.ttft.median_ms)}/"
                             f"{_num(s.ttft.p99_ms)} ms, {s.completed} ok, {s.failed} failed\n")
        elif isinstance(event, LayoutDone):
            r = event.report
            why = f": {(r.failure or {}).get('summary', '')}" if r.failure else ""
            if r.outcome == "skipped" and r.fit:
                why = f": predicted {r.fit.get('verdict')}: {r.fit.get('reason')}"
            # a failure's summary quotes the engine: through the sanitiser
            sys.stdout.write(shown(f"== {r.layout}: {r.outcome}{why} (switch {r.switch_s:.1f} s, probe "
                                   f"{r.probe_s:.1f} s, {r.elapsed_s:.1f} s in all)") + "\n")
        else:
            self.switch(event)
        sys.stdout.flush()


def _num(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _pred(prediction, key: str) -> str:
    """A predicted figure, marked `~` (predicted, never measured)."""
    if not prediction or prediction.get(key) is None:
        return "-"
    return f"~{prediction[key]:,.1f}"


def final_lines(result) -> list[str]:
    from console.ops.explore import levels_of

    levels = sorted({c for r in result.layouts for c in levels_of(r.probes)}
                    | {p["concurrency"] for r in result.layouts for p in r.predicted})
    head = (f"  {'':2}{'layout':<10}{'outcome':<10}{'c=1 tok/s/user':>16}{'predicted':>11}"
            + "".join(f"{'agg c=' + str(c):>12}{'predicted':>11}" for c in levels))
    lines = [f"Explore {result.host}/{result.service}" + (" (interrupted)" if result.interrupted else ""), head]
    for r in result.layouts:
        by = levels_of(r.probes)
        pred = {p["concurrency"]: p for p in r.predicted}
        first = by[1].per_user_tokens_per_s if 1 in by else None
        mark = "* " if r.layout == result.best else "  "
        lines.append(f"  {mark}{r.layout:<10}{r.outcome:<10}{_num(first):>16}"
                     + f"{_pred(pred.get(1), 'per_request_tok_s'):>11}"
                     + "".join(f"{_num(by[c].output_throughput if c in by else None):>12}"
                               f"{_pred(pred.get(c), 'output_tok_s'):>11}" for c in levels))
    lines.append(result.best_said())
    lines.append(f"running now: {result.left_running or 'nothing'}; {result.elapsed_s:.1f} s")
    return lines


async def _explore(host_cfg, service, opts, args: argparse.Namespace) -> int:
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.explore import Explore, ResultsStore

    printer = (lambda e: print_json(e.to_json())) if args.json else _Human(host_cfg.name, service.name)
    host = open_host(host_cfg)
    audit = open_audit()
    store = ResultsStore.beside(audit)
    try:
        result = await Explore(host, service, audit=audit, store=store, on_event=printer).run(opts, resume=args.resume)
    finally:
        store.close()
        audit.close()
        await host.close()
    if args.json:
        print_json(result.to_json())
    else:
        sys.stdout.write("\n".join(final_lines(result)) + "\n")
    if result.interrupted:
        return 130
    return 0 if result.measured else 1
