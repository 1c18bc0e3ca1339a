"""`serve-console demo`: the Kimi K2.6 story, headless, on the embedded simulated cluster.

EP8 comes up and serves; TP4 EP2, forced past the fit check, runs out of GPU memory while loading; the
console names the OOM with its figures within a second and rolls back to EP8. The units run in a
temporary state dir (or SERVE_CONSOLE_STATE_DIR) and are stopped at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the Kimi K2.6 story headless: EP8 ready, TP4 EP2 forced, OOM, rollback to EP8",
        description="Runs on the packaged demo cluster (one simulated host, 8x 96 GB GPUs, Kimi K2.6).",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        metavar="X",
        help="simulated pace: 1.0 is the story's real pace, 0.05 twenty times faster "
        "(default: SERVE_CONSOLE_SIM_TIME_SCALE, else the demo config's)",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines instead of the human report")
    parser.add_argument("--nodes", action="store_true",
                        help="the two-host story instead: DeepSeek-V3 TP16 over demo-a and demo-b, a worker "
                        "killed, the dead node named while the head answers 200")  # fmt: skip
    parser.add_argument("--stall", action="store_true",
                        help="the stall story instead: Qwen3 TP4 on demo-vllm, one rank's kernel hangs while "
                        "/health answers 200, the stall and the rank named")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.hosts.state_dir import STATE_DIR_ENV
    from console.ops.readonly import require_writable
    from console.sim.demo_cluster import load_demo_config
    from console.sim.host import TIME_SCALE_ENV

    # The story switches layouts and stops its units at the end: not something read-only mode does.
    require_writable(_operators_config(args.config), args.readonly,
                     "play the demo story (it switches layouts and stops units)")

    if args.time_scale is not None:
        from console.errors import UsageError
        from console.sim.engine_args import checked_time_scale

        try:
            checked_time_scale(args.time_scale, f"--time-scale {args.time_scale}")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        os.environ[TIME_SCALE_ENV] = repr(args.time_scale)
    config, notes = load_demo_config()
    for note in notes:
        print(f"serve-console demo: {note}", file=sys.stderr)
    host_cfg = config.hosts[0]

    def story(state_root: Path):
        if args.stall:
            from console.commands.demo_stall import stall_story

            return stall_story(config, state_root, args.json)
        if args.nodes:
            from console.commands.demo_nodes import nodes_story

            return nodes_story(config, state_root, args.json)
        return _story(host_cfg, state_root, args.json)

    if os.environ.get(STATE_DIR_ENV):
        return asyncio.run(story(Path(os.environ[STATE_DIR_ENV])))
    with tempfile.TemporaryDirectory(prefix="serve-console-demo-") as tmp:
        os.environ[STATE_DIR_ENV] = tmp  # what the story keeps (its evidence too) goes with it
        try:
            return asyncio.run(story(Path(tmp)))
        finally:
            os.environ.pop(STATE_DIR_ENV, None)


def _operators_config(path: str | None):
    """The operator's config, for its `[console] readonly`: --config, else the one found (./hosts.toml, the
    user config dir); None when there is none. A broken one is its one-line error, as for every command."""
    from console.config import find_config, load_config
    from console.errors import ConfigError

    if path is None:
        try:
            path = str(find_config())
        except ConfigError:  # no config at all: the demo needs none
            return None
    return load_config(path)


async def _story(host_cfg, state_root: Path, as_json: bool) -> int:
    from console.commands.switch_output import HumanPrinter, JsonPrinter
    from console.domain.safe_text import shown
    from console.factory import open_host
    from console.ops.audit import AuditLog
    from console.ops.switch import FAILED, READY, headline, switch_layout
    from console.sim.host import time_scale

    host = open_host(host_cfg, state_dir=state_root, stop_units_on_close=True)
    audit = AuditLog(state_root / "audit.sqlite3")
    service = host_cfg.services[0]
    say = (lambda _t: None) if as_json else (lambda text: print(shown(text)))  # causes quote host text
    printer = JsonPrinter() if as_json else HumanPrinter(host.name, service.name)
    say(f"serve-console demo: host {host.name}, {service.name}, time scale {time_scale(host_cfg):g}")
    try:
        say("")
        say("1. Switch to EP8 (--tp-size 8 --ep-size 8), the story's best layout:")
        first = await switch_layout(host, service, "EP8", audit=audit, on_event=printer)
        if first.outcome != READY:
            say("EP8 did not come up; the story cannot go on.")
            return 1
        say("")
        say("2. Switch to TP4 EP2, forced past the fit check (the story's OOM):")
        second = await switch_layout(host, service, "TP4 EP2", force=True, audit=audit, on_event=printer)
        say("")
        say("Report")
        for label, res in (("switch", first), ("switch --force", second), ("rollback", second.rollback)):
            if res is not None:
                say(f"  {label:<16} {res.layout:<8} {res.outcome:<7} after {res.elapsed_s:5.1f} s, "
                    f"verdict {res.detected_after_s or 0.0:.3f} s after the decisive log line")  # fmt: skip
        if second.failure is not None:
            say(f"  cause: {headline(second)}")
        ok = second.outcome == FAILED and second.rollback is not None and second.rollback.outcome == READY
        say("  The operator's 15 s polling loop would have needed up to 15 s to notice the death, and would have")
        say("  taken /v1/models answering for readiness.")
        return 0 if ok else 1
    finally:
        say("")
        say("Stopping the demo's units...")
        audit.close()
        await host.close()  # stops the units: the demo leaves no engine behind
