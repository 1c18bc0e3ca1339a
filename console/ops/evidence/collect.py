"""Collect one incident's evidence, every part at once, within a deadline (folder.py is the format).

A part that has not answered when the deadline comes is written down as `timed-out`, never waited
for: a restart the operator asked for waits EVIDENCE_DEADLINE_S at most.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import ServiceConfig
from console.domain.values import UnitState
from console.hosts.base import Host
from console.hosts.state_dir import state_dir
from console.ops.cluster import node_hosts
from console.ops.evidence import parts as p
from console.ops.evidence.folder import (
    FORMAT,
    OK,
    SAME_INCIDENT_S,
    TIMED_OUT,
    UNAVAILABLE,
    Folder,
    Part,
    claim,
    evidence_root,
    folder_name,
    prune,
    read_manifest,
    recent_of_unit,
    safe_name,
)

#: The longest a collection takes: a restart the operator asked for waits this much at most for it.
EVIDENCE_DEADLINE_S = 30.0
_POLL_S = 0.2
#: Collections under way in this process, by folder: a second caller awaits the first one's result.
_running: dict[Path, asyncio.Future[Evidence]] = {}


@dataclass(frozen=True, slots=True)
class Evidence:
    """A collected (or found) evidence folder."""

    path: Path
    manifest: dict[str, Any]
    reused: bool = False
    """Another collection of the same incident made it; nothing was collected again."""

    @property
    def timed_out(self) -> list[str]:
        return [_label(part) for part in self.manifest.get("parts", []) if part.get("status") == TIMED_OUT]

    def words(self) -> str:
        """`evidence: PATH` and the parts that timed out, in one line."""
        late = self.timed_out
        return f"evidence: {self.path}" + (f" (timed out: {', '.join(late)})" if late else "")


def _label(part: dict[str, Any]) -> str:
    where = part.get("node") or ""
    unit = f" {part['unit']}" if part.get("unit") else ""
    return f"{part.get('name')}{unit}@{where}"


def _nodes(host: Host, service: ServiceConfig) -> list[Host]:
    if service.cluster is None:
        return [host]
    try:
        return node_hosts(host, service)
    except Exception:
        return [host]  # the peers were not opened: the head's own evidence at least


async def collect_evidence(
    host: Host,
    service: ServiceConfig,
    reason: str,
    *,
    kind: str,
    key: str,
    since: float | None = None,
    deadline_s: float = EVIDENCE_DEADLINE_S,
    state_root: Path | None = None,
    trigger: str = "verdict",
    unit: str | None = None,
    same_after: float | None = None,
) -> Evidence:
    """Collect the evidence of one incident of `service` (the stall verdict, a failed start, a dead engine
    or node) into its folder, once: a second call for the same `key` finds the first one's folder.

    Args:
        kind: what the incident is (`stalled`, `unit_failed`, `engine_died`, `node_dead`, ...).
        key: what tells this incident from the next one of the same service (a unit and its state's
            `since`, a stall's start); the same key always names the same folder.
        since: when the incident began (POSIX s), the folder's stamp; now when None.
        deadline_s: when the parts still running are written down as timed out.
        trigger: what asked for it: `verdict` (the stall verdict, the watch daemon's alert), or the action
            about to run (`stop`, `restart`, `switch`, `rollback`).
        unit: the unit whose run the incident is; a folder of it begun after `same_after` is this
            incident's (another face saw the same failure a moment earlier).
        same_after: default SAME_INCIDENT_S before `since`; a start that failed gives its own start.
    """
    started = time.time()
    root = evidence_root(state_root or state_dir())
    name = folder_name(host.name, service.name, key, since if since is not None else started)
    if (root / name) in _running:
        first = await asyncio.shield(_running[root / name])
        return Evidence(first.path, first.manifest, reused=True)
    after = same_after if same_after is not None else (since if since is not None else started) - SAME_INCIDENT_S
    if unit is not None and (earlier := recent_of_unit(root, host.name, service.name, unit, after)) is not None:
        return Evidence(earlier, read_manifest(earlier) or {}, reused=True)
    folder = claim(root, name)
    if folder is None:
        return await _wait_for(root / name, deadline_s)
    done: asyncio.Future[Evidence] = asyncio.get_running_loop().create_future()
    _running[folder.path] = done
    try:
        evidence = await _collect(folder, host, service, reason, kind=kind, key=key, since=since,
                                  deadline_s=deadline_s, trigger=trigger, started=started, unit=unit)
        done.set_result(evidence)
        return evidence
    except BaseException as exc:
        done.set_exception(exc)
        done.exception()  # retrieved: a caller that never came leaves no warning behind
        raise
    finally:
        _running.pop(folder.path, None)
        prune(root)


async def _collect(folder: Folder, host: Host, service: ServiceConfig, reason: str, *, kind: str, key: str,
                   since: float | None, deadline_s: float, trigger: str, started: float,
                   unit: str | None) -> Evidence:
    nodes = _nodes(host, service)
    jobs: list[tuple[Part, Callable[[], Awaitable[str]]]] = []

    def job(name_: str, node: Host, file: str, read: Callable[[], Awaitable[str]], unit: str | None = None) -> None:
        jobs.append((Part(name_, node.name, UNAVAILABLE, file=file, unit=unit), read))

    async def stacks(node: Host) -> str:
        return await p.stacks_text(node, service, await _states(node, service))

    job("units", host, "units.jsonl", lambda: p.units_text(nodes, service))
    for node in nodes:
        tag = safe_name(node.name)
        for unit in service.all_units():
            job("journal", node, f"journal-{tag}-{safe_name(unit)}.txt",
                lambda n=node, u=unit: p.journal_text(n, u), unit=unit)
        job("stacks", node, f"stacks-{tag}.txt", lambda n=node: stacks(n))
        job("gpus", node, f"gpus-{tag}.txt", lambda n=node: p.gpus_text(n))
    job("ras", host, "ras.txt", lambda: p.ras_text(host, service))
    job("metrics", host, "metrics.txt", lambda: p.metrics_text(host, service))
    written = await _run_all(folder, jobs, started + deadline_s)
    manifest = {
        "format": FORMAT, "host": host.name, "service": service.name, "engine": service.engine.value,
        "kind": kind, "reason": reason, "incident": key, "unit": unit, "since": since, "trigger": trigger,
        "started_at": round(started, 3), "finished_at": round(time.time(), 3), "deadline_s": deadline_s,
        "nodes": [n.name for n in nodes], "bytes": folder.written_bytes,
        "parts": [part.to_json() for part in written],
    }
    folder.write_manifest(manifest)
    return Evidence(folder.path, manifest)


async def _states(node: Host, service: ServiceConfig) -> list[UnitState]:
    out = []
    for unit in service.all_units():
        try:
            out.append(await node.services.state(unit))
        except Exception:
            continue
    return out


async def _run_all(folder: Folder, jobs: Sequence[tuple[Part, Callable[[], Awaitable[str]]]],
                   deadline: float) -> list[Part]:
    async def one(part: Part, read: Callable[[], Awaitable[str]]) -> Part:
        t0 = time.monotonic()
        try:
            text = await read()
        except p.Unavailable as exc:
            return _done(part, UNAVAILABLE, t0, why=str(exc))
        except Exception as exc:  # a part that fails never costs the others
            return _done(part, UNAVAILABLE, t0, why=f"{type(exc).__name__}: {exc}"[:300])
        if not text:  # a unit that never ran has no journal: said, and no empty file
            return _done(dataclasses.replace(part, file=None), OK, t0, why="empty")
        size, cut = folder.write_text(part.file or "", text)
        return _done(part, OK, t0, size=size, cut=cut)

    tasks = [asyncio.create_task(one(part, read)) for part, read in jobs]
    budget_s = max(0.0, deadline - time.time())
    await asyncio.wait(tasks, timeout=budget_s)
    out = []
    for task, (part, _) in zip(tasks, jobs, strict=True):
        if task.done() and not task.cancelled() and task.exception() is None:
            out.append(task.result())
        else:
            task.cancel()
            out.append(_done(part, TIMED_OUT, None, why=f"no answer within the collection's {budget_s:g} s"))
    await asyncio.gather(*tasks, return_exceptions=True)
    return out


def _done(part: Part, status: str, t0: float | None, *, why: str | None = None, size: int = 0,
          cut: bool = False) -> Part:
    took = time.monotonic() - t0 if t0 is not None else 0.0
    return Part(part.name, part.node, status, file=part.file if status == OK else None, why=why, bytes=size,
                truncated=cut, took_s=took, unit=part.unit)


async def _wait_for(path: Path, deadline_s: float) -> Evidence:
    """The folder another collector is writing: its manifest once written, `deadline_s` at most."""
    end = time.monotonic() + deadline_s
    # Another process writes it: there is nothing to await here but its file.
    while (manifest := read_manifest(path)) is None and time.monotonic() < end:  # noqa: ASYNC110
        await asyncio.sleep(_POLL_S)
    return Evidence(path, manifest or {"format": FORMAT, "parts": [], "collecting": True}, reused=True)
