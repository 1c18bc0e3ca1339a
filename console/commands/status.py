"""`serve-console status`: every service's unit state, active layout, GPUs and health."""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.commands.host_args import add_host_option, load, pick_host, print_json
from console.domain.triage import xid_findings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="unit state, active layout, GPU memory and health of each service",
        description="One line per service (JSON lines with --json). Exit 1 if a host could not be read.",
    )
    add_host_option(parser, service=False)
    parser.add_argument("--json", action="store_true", help="one JSON object per service")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    hosts = [pick_host(config, args.host)] if args.host else list(config.hosts)
    return asyncio.run(_status(hosts, args.json))


async def _status(host_cfgs, as_json: bool) -> int:
    from console.domain.safe_text import shown
    from console.factory import open_host
    from console.hosts.state_dir import state_dir
    from console.ops.audit import open_audit
    from console.ops.engine_status import engine_readings, figures_line, metrics_json
    from console.ops.serving import MemoryFile, serving_line, status_verdict
    from console.ops.status import service_status

    audit = open_audit()
    memories = MemoryFile(state_dir())
    failed = False
    try:
        for host_cfg in host_cfgs:
            host = open_host(host_cfg)
            try:
                snapshot = await host.gpus.sample()
                statuses = [await service_status(host, service, audit=audit, snapshot=snapshot)
                            for service in host_cfg.services]
                # the engines' own numbers: two /metrics readings a second apart, every running one at once
                engines = await asyncio.gather(*(
                    engine_readings(host, service, running=st.active_unit is not None)
                    for service, st in zip(host_cfg.services, statuses, strict=True)))
                # the progress verdict, against the last one this state dir kept (docs/stalls.md)
                verdicts = [await status_verdict(host, service, st, scrapes, memories)
                            for service, st, (_, _, scrapes) in zip(host_cfg.services, statuses, engines, strict=True)]
                await _print_nodes(host, host_cfg, as_json)
                for st, (figures, why, _), verdict in zip(statuses, engines, verdicts, strict=True):
                    failed = failed or st.error is not None
                    evidence = _evidence(host_cfg.name, st.service)
                    if as_json:
                        serving = verdict.to_json()
                        if verdict.state == "stalled" and serving.get("evidence") is None:
                            serving["evidence"] = evidence  # the newest folder: the stall's, once kept
                        print_json({**st.to_json(), **metrics_json(figures, why), "serving": serving,
                                    "evidence": evidence, "bundle": _bundle(host_cfg.name, st.service)})
                    else:
                        _print_human(st)
                        why = "not read (the host does not answer)" if st.unreachable else why
                        print(f"  {shown(figures_line(figures, why))}")
                        print(f"  {shown(serving_line(verdict))}")
                        if evidence is not None:
                            print(f"  evidence: {shown(evidence)}")
            except BrokenPipeError:  # our own stdout closed (`status | head`): no host is at fault
                raise
            except Exception as exc:  # one host down never hides the others
                failed = True
                if as_json:
                    print_json({"event": "status", "host": host_cfg.name, "error": str(exc)})
                else:
                    print(shown(f"{host_cfg.name}: unreachable: {exc}"), file=sys.stderr)
            finally:
                await host.close()
    finally:
        memories.save()
        audit.close()
    return 1 if failed else 0


def _evidence(host: str, service: str) -> str | None:
    """The newest evidence folder of the service (ops/evidence), None when there is none."""
    from console.hosts.state_dir import state_dir
    from console.ops.evidence import latest_evidence

    try:
        path = latest_evidence(state_dir(), host, service)
    except Exception:  # an unusable state dir has already been said by the audit log
        return None
    return None if path is None else str(path)


def _bundle(host: str, service: str) -> str | None:
    """The newest incident bundle of the service (docs/bundle.md), None when there is none."""
    from console.hosts.state_dir import state_dir
    from console.ops.bundle import bundles_root, latest_bundle

    try:
        path = latest_bundle(bundles_root(state_dir()), host, service)
    except Exception:  # an unusable state dir has already been said by the audit log
        return None
    return None if path is None else str(path)


async def _print_nodes(host, host_cfg, as_json: bool) -> None:
    """A host that is a node of another host's service: that service's units here, in one line each (its
    health is the head's `status`, which judges every node)."""
    from console.domain.safe_text import shown
    from console.ops.status import unit_states

    for service in host_cfg.node_of:
        assert service.cluster is not None
        head, rank = service.cluster.nodes[0], service.cluster.nodes.index(host_cfg.name)
        running = [s for s in await unit_states(host, service) if s.is_running]
        orphan = bool(running) and await _head_runs_none(host.peers.get(head), service)
        if as_json:
            print_json({"event": "node", "host": host_cfg.name, "head": head, "service": service.name,
                        "node_rank": rank, "running": [s.unit for s in running],
                        "main_pids": [s.main_pid for s in running], "orphan": orphan})  # fmt: skip
            continue
        what = ", ".join(f"{s.unit} {s.active} ({s.sub}), main pid {s.main_pid or '-'}" for s in running)
        judged = (f"ORPHAN: the head {head} runs none of {service.name}'s units; this node holds its GPUs and "
                  f"serves nothing (serve-console stop --host {head} stops it)" if orphan
                  else f"status --host {head} judges every node")  # fmt: skip
        sys.stdout.write(shown(f"{host_cfg.name}: node-rank {rank} of {head}/{service.name}: "
                               f"{what or 'no unit running'} ({judged})") + "\n")


async def _head_runs_none(head, service) -> bool:
    """The head answers and runs none of the service's units (False when it cannot be read)."""
    from console.ops.status import unit_states

    if head is None:
        return False
    try:
        return not any(s.is_running for s in await unit_states(head, service))
    except Exception:  # a head that cannot be read is its own status's to say
        return False


def _print_human(st) -> None:
    """The service in plain lines; unit states, GPU names and errors are host text, shown safely."""
    from console.domain.safe_text import shown

    def print(line: str) -> None:
        sys.stdout.write(shown(line) + "\n")

    unit = st.active_state
    unread = st.unreachable
    if unit is not None:
        state = f"{unit.active} ({unit.sub})"
    elif unread is not None:  # the units could not be read: nothing is known to run, nor known not to
        state = f"state unknown: {unread}"
    else:
        dead = [u for u in st.units if u.active == "failed"]
        state = f"failed: {', '.join(u.unit for u in dead)}" if dead else "no unit running"
    health = st.health.status if st.health else "-"
    if st.health is not None and st.health.status == "down" and st.health.error and unread is None:
        # its first words (timed out, connection refused); an unreachable host's fails for the reason said
        health += f" ({st.health.error.split(' (', 1)[0]})"
    layout = st.active_layout or ("?" if unread is not None else "-")
    print(f"{st.host}/{st.service} [{st.engine}]  layout {layout}  {state}  health {health}")
    if unit is not None:
        print(f"  unit {unit.unit}, main pid {unit.main_pid or '-'}")
    for orphan in st.orphans:  # the head runs nothing, a node still does: it holds its GPUs
        print(f"  orphan: {orphan.words(st.host, st.service)}")
    for node in st.ranks:  # a layout over several hosts: each node on its own, whatever the head says
        print(f"  {node.words()}")
    if st.group not in (None, "alive"):
        print(f"  group: {st.group.upper()} (the head's health says {health}; a node is {st.group})")
    if st.death is not None:
        print(f"  died: {st.death.words()}")
        if st.death.finding.hint:
            print(f"  what to do: {st.death.finding.hint}")
    gpus = st.gpus.gpus if st.gpus else ()
    if gpus:
        used = sum(g.used_mib or 0 for g in gpus)
        total = sum(g.total_mib or 0 for g in gpus)
        print(f"  GPUs: {len(gpus)}, {used} / {total} MiB used")
        for g in gpus:
            print(
                f"    GPU {g.index}  {g.used_mib if g.used_mib is not None else '?':>6} / {g.total_mib or '?'} MiB  {g.name or ''}"
            )
    elif st.gpus and st.gpus.error:
        print(f"  GPUs: {st.gpus.error}")
    for finding in xid_findings(st.gpus):
        print(f"  finding: {finding.summary}")
    if st.error:
        print(f"  error: {st.error}")
