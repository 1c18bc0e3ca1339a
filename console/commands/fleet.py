"""`serve-console fleet`: one line per host, from Prometheus when `[fleet]` is configured, else over SSH.

Exit codes: 0 every host up and fresh, 1 a host is down, stale or missing (or Prometheus could not be
read), 2 a usage or config error.
"""

from __future__ import annotations

import argparse
import asyncio

from console.commands.host_args import load, print_json
from console.domain.safe_text import shown
from console.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fleet",
        help="every host at a glance: GPUs, engines' load and data age (Prometheus or SSH)",
        description="One line per host (JSON lines with --json). With [fleet] prometheus = URL in hosts.toml "
        "it reads Prometheus in one query and opens no SSH connection; without, it asks each host over SSH.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per host")
    parser.add_argument("--at", type=float, metavar="UNIX_S",
                        help="the fleet as Prometheus saw it at this time (seconds since the epoch)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if args.at is not None and config.fleet is None:
        raise UsageError(f"{config.path}: --at needs a [fleet] prometheus = URL table")
    rows = asyncio.run(_rows(config, args.at))
    for row in rows:
        if args.json:
            print_json(row.to_json())
        else:
            print(_human(row))
    return 1 if any(r.stale or r.up is not True for r in rows) else 0


async def _rows(config, at: float | None):
    if config.fleet is not None:
        from console.ops.fleet import PrometheusFleet

        fleet = PrometheusFleet(config.fleet, config.hosts)
        try:
            return await fleet.rows(at=at)
        finally:
            await fleet.close()
    from console.factory import open_host
    from console.ops.fleet import ssh_row

    hosts = [open_host(h) for h in config.hosts]
    try:
        return await asyncio.gather(*(ssh_row(h) for h in hosts))
    finally:
        for host in hosts:
            await host.close()


def _num(value: object, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def _human(row) -> str:
    """`gpu-07  prometheus  up  4s  612/640 GiB 8/8 busy  run 12 wait 3  KV 81%  1,930 tok/s`."""
    up = {True: "up", False: "DOWN", None: "-"}[row.up]
    age = "never seen" if row.age_s is None else f"{row.age_s:.0f}s"
    if row.stale:
        age = f"STALE {age}"
    if row.gpus_total_mib:
        mem = f"{row.gpus_used_mib / 1024:,.0f}/{row.gpus_total_mib / 1024:,.0f} GiB {_num(row.gpus_busy)}/{_num(row.gpu_count)} busy"
    else:
        mem = "GPUs -"
    kv = "-" if row.kv_cache_usage is None else f"{row.kv_cache_usage:.0%}"
    engine = (f"run {_num(row.running_requests)} wait {_num(row.waiting_requests)}  KV {kv}  "
              f"{_num(row.generation_tokens_per_s, ',.0f')} tok/s")
    line = f"{row.host:<16} {row.source:<10} {up:<4} {age:<12} {mem:<26} {engine}"
    if row.error:
        line += f"  ({row.error})"
    return shown(line)  # host names from Prometheus labels and error texts are the hosts' words
