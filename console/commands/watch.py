"""`serve-console watch`: the unattended daemon. It watches every host of hosts.toml and sends alerts to
Alertmanager (`[watch] alertmanager`) and a webhook (from the environment), until stopped.

Meant to run as a systemd service (docs/alerts.md). Each alert that fires or resolves is one line on
stderr (the service's journal); `--json` also prints it as a JSON line on stdout. SIGTERM stops it
cleanly (exit 0); what it still owes stays queued in the state file for its next start.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.host_args import load, print_json
from console.domain.safe_text import printable
from console.errors import UsageError
from console.shutdown import SHUTDOWN, on_ending_signals


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="the unattended daemon: alerts to Alertmanager and a webhook (run it as a service)",
        description="Watch every host of hosts.toml and raise alerts: a failed unit or dead engine (with its "
        "triaged card), a crash loop, a start that hangs, a host unreachable, /health down or flapping, KV cache or "
        "waiting requests high, a GPU Xid. Alerts go to [watch] alertmanager and SERVE_CONSOLE_WATCH_WEBHOOK_URL, "
        "and into the state file (serve-console alerts). Runs until stopped.",
    )
    parser.add_argument("--host", action="append", metavar="H", help="watch only this host (repeatable)")
    parser.add_argument("--json", action="store_true", help="also print each alert that fires or resolves as JSON")
    parser.set_defaults(func=run)


def say(line: str) -> None:
    print(f"serve-console watch: {printable(line)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from console.factory import open_host
    from console.ops.audit import open_audit
    from console.ops.state_db import AuditError
    from console.ops.watch import WatchDaemon, WatchLock, build_sinks, open_alert_store, rank_liveness

    config = load(args)
    names = args.host or [h.name for h in config.hosts]
    unknown = [n for n in names if config.host(n) is None]
    if unknown:
        known = ", ".join(h.name for h in config.hosts)
        raise UsageError(f"{config.path}: no host {unknown[0]!r} (hosts: {known})")
    sinks = build_sinks(config.watch)
    store = open_alert_store(queue_max=config.watch.queue_max)
    try:
        lock = WatchLock(store.path)  # one daemon per state file: a second would alert twice
    except OSError as exc:
        store.close()
        raise AuditError(f"{store.path}: cannot take the watch lock ({exc.strerror or exc})") from None
    except BaseException:
        store.close()
        raise
    audit = open_audit()

    def report(transition) -> None:
        if args.json:
            print_json({"event": "alert", "transition": transition.kind, **transition.alert.to_json()})
            sys.stdout.flush()

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        # systemd's stop: end the way Ctrl-C does, cleanly, within the shutdown's deadline (before
        # TimeoutStopSec's SIGKILL); a second SIGTERM exits at once.
        on_ending_signals(asyncio.get_running_loop(), task.cancel)
        hosts = [open_host(config.host(n)) for n in dict.fromkeys(names)]  # type: ignore[arg-type]
        daemon = WatchDaemon(hosts, config, store, sinks, say=say, on_transition=report, audit=audit,
                             rank_source=rank_liveness)  # each node of a service over several hosts
        try:
            await daemon.run()
        except asyncio.CancelledError:
            pass
        finally:  # within the shutdown's deadline; what is still here when it passes is named
            with SHUTDOWN.stopping("the watch's destinations"):
                await daemon.close()
            for host in hosts:
                with SHUTDOWN.stopping(f"host {host.name} (its connections)"):
                    await host.close()

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or a second stop while closing: still a stop
        pass
    try:
        say(f"stopped; {store.queued()} deliveries stay queued for the next start")
    except AuditError as exc:
        say(f"stopped; {exc}")
    except KeyboardInterrupt:  # Ctrl-C pressed again while stopping: docs/cli.md's exit 0 all the same
        pass
    finally:
        store.close()
        audit.close()
        lock.release()
    return 0
