"""Freeze one incident into a bundle: the journal of every unit of the service on every node around
the incident, the units' states, the switch's events and verdict, the failure card and the evidence
folder, on one clock (docs/bundle.md).

The switch's own parts (its events as `switch --json` prints them, the card's rows) come as plain
data: this package stands below the switch and knows nothing of its types.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.bundle.fileformat import SUFFIX, write_records
from console.ops.cluster import node_hosts
from console.ops.evidence import MANIFEST, folder_name

#: The window around the incident: from this long before it ...
BEFORE_S = 600.0
#: ... to this long after it, or to the bundle's writing, whichever comes first.
AFTER_S = 120.0
#: The most journal entries read per unit and node (the window is cut from them).
MAX_JOURNAL_ENTRIES = 50_000
#: A bundle that cannot be written in this time is not written (it never holds back a switch's verdict).
WRITE_DEADLINE_S = 30.0


@dataclass(frozen=True, slots=True)
class Incident:
    """What the bundle is of: a failed start (its unit, when it began, its verdict, when the rollback began)."""

    kind: str
    reason: str
    unit: str | None
    started_at: float
    verdict_at: float
    ended_at: float | None = None
    """When the failed start's own journal ends (its rollback began); None: at the bundle's end."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "unit": self.unit, "started_at": self.started_at,
                "verdict_at": self.verdict_at, "ended_at": self.ended_at}


def bundles_root(state_root: Path) -> Path:
    return state_root / "bundles"


def bundle_path(state_root: Path, host: str, service: str, incident: Incident) -> Path:
    """`<state dir>/bundles/<stamp>-<host>-<service>-<id>.jsonl.gz`, named as evidence folders are."""
    key = f"bundle:{incident.unit}:{incident.started_at}"
    return bundles_root(state_root) / (folder_name(host, service, key, incident.started_at) + SUFFIX)


def _nodes(host: Host, service: ServiceConfig) -> list[Host]:
    if service.cluster is None:
        return [host]
    try:
        return node_hosts(host, service)
    except Exception:
        return [host]


async def _journal(node: Host, unit: str, start: float, end: float) -> list[dict[str, Any]]:
    out = []
    async for entry in node.services.journal(unit, follow=False, lines=MAX_JOURNAL_ENTRIES):
        if start <= entry.ts <= end:
            out.append({"record": "journal", "ts": entry.ts, "node": node.name, "unit": entry.unit or unit,
                        "message": entry.message, "source": entry.source, "priority": entry.priority,
                        "pid": entry.pid})
    return out


async def _states(node: Host, service: ServiceConfig, now: float) -> list[dict[str, Any]]:
    out = []
    for unit in service.all_units():
        try:
            st = await node.services.state(unit)
        except Exception as exc:
            out.append({"record": "unit_state", "ts": now, "node": node.name, "unit": unit,
                        "error": str(exc) or type(exc).__name__, "origin": "at writing"})
            continue
        out.append({"record": "unit_state", "ts": now, "node": node.name, "unit": unit, "active": st.active,
                    "sub": st.sub, "result": st.result, "main_pid": st.main_pid, "since": st.since,
                    "origin": "at writing"})
    return out


def evidence_records(folder: str | None) -> list[dict[str, Any]]:
    """The evidence folder as records: its manifest on the timeline, each file it names beside it."""
    if folder is None:
        return []
    path = Path(folder)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    ts = manifest.get("finished_at") or manifest.get("started_at") or time.time()
    out: list[dict[str, Any]] = [{"record": "evidence", "ts": ts, "path": str(path), "manifest": manifest}]
    for part in manifest.get("parts", []):
        if part.get("file"):
            try:
                text = (path / part["file"]).read_text(errors="replace")
            except OSError:
                continue
            out.append({"record": "evidence_file", "file": part["file"], "text": text})
    return out


async def write_bundle(
    host: Host,
    service: ServiceConfig,
    incident: Incident,
    path: Path,
    *,
    events: Sequence[tuple[float, dict[str, Any]]],
    result: dict[str, Any],
    card: Sequence[dict[str, str]],
    headline: str,
    evidence: str | None,
    before_s: float = BEFORE_S,
    after_s: float = AFTER_S,
) -> int:
    """Write the incident's bundle at `path`; its size in bytes.

    `events` are (wall-clock time, JSON) of each switch event as it was emitted; `result` is the final
    result's JSON (its rollback nested), `card` the failure card's rows (label, value, tone).
    """
    now = time.time()
    start, end = incident.verdict_at - before_s, min(incident.verdict_at + after_s, now)
    nodes = _nodes(host, service)
    journals = await asyncio.gather(*(_journal(n, u, start, end) for n in nodes for u in service.all_units()))
    states = [row for n in nodes for row in await _states(n, service, now)]
    timeline: list[dict[str, Any]] = [row for rows in journals for row in rows]
    for ts, event in events:
        timeline.append({"record": "switch", "ts": ts, "event": event})
        if event.get("event") == "state":  # the unit's state changes, as the switch saw them
            timeline.append({"record": "unit_state", "ts": ts, "node": event.get("node") or host.name,
                             **{k: event.get(k) for k in ("unit", "active", "sub", "result", "main_pid")},
                             "origin": "switch"})
    timeline += states
    timeline.append({"record": "verdict", "ts": incident.verdict_at, "result": result})
    timeline.append({"record": "card", "ts": incident.verdict_at, "headline": headline, "rows": list(card)})
    evidence_rows = evidence_records(evidence)
    timeline += [r for r in evidence_rows if r["record"] == "evidence"]
    timeline.sort(key=lambda r: r["ts"])
    header = {
        "host": host.name, "service": service.name, "engine": service.engine.value,
        "incident": incident.to_json(),
        "window": {"before_s": before_s, "after_s": after_s, "from": start, "to": end},
        "nodes": [{"name": n.name, "address": n.config.address or n.name} for n in nodes],
        "written_at": now, "evidence": evidence,
    }
    files = [r for r in evidence_rows if r["record"] == "evidence_file"]
    return await asyncio.to_thread(write_records, path, header, [*timeline, *files])

