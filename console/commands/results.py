"""`serve-console results`: each service's layouts compared from their stored probes, best marked."""

from __future__ import annotations

import argparse
import csv
import sys
import time

from console.commands.host_args import add_host_option, load, pick_host, print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "results",
        help="compare layouts from stored probes: tok/s per user and in aggregate, TTFT, TPOT, fit",
        description="Per service: layouts x (tok/s per user at concurrency 1, aggregate tok/s at each "
        "concurrency, TTFT p50/p99 and TPOT at the top concurrency, fit headroom, outcome, when), the "
        "best by --pick marked with *, and the Pareto frontier of tok/s per user against tok/s per GPU. "
        "Reads the local results store only.",
    )
    add_host_option(parser)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON line per service")
    out.add_argument("--csv", action="store_true", help="one CSV row per layout")
    parser.add_argument("--pick", default="throughput", metavar="RULE",
                        help="throughput (default), c1 or ttft-slo:MS")
    parser.set_defaults(func=run)


def _num(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def human(res) -> list[str]:
    """The comparison as a table, then the frontier."""
    levels = res.concurrencies
    head = ["", "layout", "c=1 tok/s/user"] + [f"agg c={c}" for c in levels]
    head += ["TTFT p50/p99 ms", "TPOT ms", "headroom GiB", "outcome", "when"]
    rows = [head]
    for r in res.rows:
        top = r.top
        ttft = "-" if top is None else f"{_num(r.at(top, 'median_ttft_ms'), 0)}/{_num(r.at(top, 'p99_ttft_ms'), 0)}"
        rows.append(["*" if r.best else "", r.layout, _num(r.c1_per_user)]
                    + [_num(r.at(c, "output_throughput")) for c in levels]
                    + [ttft + (f" @c={top}" if top else ""),
                       _num(r.at(top, "mean_tpot_ms") if top else None) + (f" @c={top}" if top and res.mixed_tops else ""),
                       _num(r.headroom_gib, 2), (r.outcome or "-") + (" (stalled)" if r.why else ""),
                       _when(r.when)])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [f"{res.host}/{res.service}  (best by {res.pick}: {res.best or 'none measured'})"]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if res.mixed_tops:
        tops = ", ".join(f"c={r.top} for {r.layout}" for r in res.rows if r.top is not None)
        lines.append(f"  note: TTFT and TPOT are at each layout's top concurrency ({tops}): a higher concurrency "
                     "costs TPOT, so compare them at one concurrency (probe each layout at the same levels)")
    lines += [f"  {r.layout}: {r.why}" for r in res.rows if r.why]
    if res.pareto:
        lines.append("  Pareto frontier (tok/s per user vs tok/s per GPU):")
        lines += [f"    {p.layout:<10} c={p.concurrency:<4} {p.tokens_per_s_per_user:8.1f} tok/s/user "
                  f"{p.tokens_per_s_per_gpu:8.1f} tok/s/GPU" for p in res.pareto]
    return lines


def run(args: argparse.Namespace) -> int:
    from console.ops.audit import open_audit
    from console.ops.explore import ResultsStore, parse_pick, service_results

    pick = parse_pick(args.pick)
    config = load(args)
    hosts = [pick_host(config, args.host)] if args.host or len(config.hosts) == 1 else list(config.hosts)
    audit = open_audit()
    store = ResultsStore.beside(audit)
    try:
        reports = [service_results(store, h, s, pick) for h in hosts for s in h.services
                   if args.service is None or s.name == args.service]
    finally:
        store.close()
        audit.close()
    if args.service is not None and not reports:
        from console.errors import UsageError

        raise UsageError(f"no service {args.service!r} on {', '.join(h.name for h in hosts)}")
    writer = csv.writer(sys.stdout, lineterminator="\n") if args.csv else None
    if writer is not None:
        writer.writerow(["host", "service", "layout", "best", "gpus", "c1_tokens_per_s_per_user",
                         "concurrency", "aggregate_tokens_per_s", "median_ttft_ms", "p99_ttft_ms",
                         "mean_tpot_ms", "headroom_gib", "outcome", "when"])
    if args.service is None and any(res.rows for res in reports):
        reports = [res for res in reports if res.rows]  # services never probed say nothing
    for res in reports:
        if args.json:
            print_json(res.to_json())
        elif writer is not None:
            for r in res.rows:
                for c in sorted(r.levels) or [None]:
                    writer.writerow([res.host, res.service, r.layout, int(r.best), r.gpus, r.c1_per_user, c,
                                     r.at(c, "output_throughput"), r.at(c, "median_ttft_ms"),
                                     r.at(c, "p99_ttft_ms"), r.at(c, "mean_tpot_ms"), r.headroom_gib,
                                     r.outcome, r.when])  # fmt: skip
        else:
            sys.stdout.write("\n".join(human(res)) + "\n\n")
    return 0
