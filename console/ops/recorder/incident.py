"""Bundles of the incidents the watch daemon sees (a death, a stall, a dead rank, a crash loop, a
rollback), cut from the host's rolling record rather than read back from the hosts: the record already
holds the journal, the states and the samples of the window, even after a restart cleared them.
Same file, format and redaction as a failed start's bundle (docs/bundle.md).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from console.ops.bundle import AFTER_S, BEFORE_S, Incident, bundle_path, evidence_records, write_records
from console.ops.recorder.segments import read_window, redacted

#: The recorder's kinds that are a bundle's timeline records as they are (the `kind` becomes `record`).
KINDS = ("journal", "unit_state", "switch", "verdict", "metrics", "gpu", "health", "triage")


def incident_records(folder: Path, start: float, end: float, service: str | None) -> list[dict[str, Any]]:
    """The record's window as bundle timeline records, only the named service's where a record names one."""
    out = []
    for rec in read_window(folder, start, end):
        kind = rec.get("kind")
        if kind not in KINDS or (service and rec.get("service") not in (None, service)):
            continue
        out.append({"record": kind, **{k: v for k, v in rec.items() if k != "kind"}})
    return out


def write_incident_bundle(
    folder: Path,
    state_root: Path,
    *,
    host: str,
    service: str,
    engine: str,
    nodes: list[dict[str, str]],
    incident: Incident,
    evidence: str | None = None,
    before_s: float = BEFORE_S,
    after_s: float = AFTER_S,
    now: float | None = None,
) -> tuple[Path, int]:
    """Freeze the incident's window of the record at `folder` into a bundle; its path and byte size.

    The window runs from `before_s` before the verdict to `after_s` after it or to now, whichever is first.
    """
    now = time.time() if now is None else now
    start, end = incident.verdict_at - before_s, min(incident.verdict_at + after_s, now)
    timeline = incident_records(folder, start, end, service)
    ev = [redacted(r) for r in evidence_records(evidence)]
    timeline += [r for r in ev if r["record"] == "evidence"]
    timeline.sort(key=lambda r: r["ts"])
    header = {
        "host": host, "service": service, "engine": engine, "incident": incident.to_json(),
        "window": {"before_s": before_s, "after_s": after_s, "from": start, "to": end},
        "nodes": nodes, "written_at": now, "evidence": evidence, "source": "record",
    }
    path = bundle_path(state_root, host, service, incident)
    files = [r for r in ev if r["record"] == "evidence_file"]
    # the record's own lines were redacted as they were written; the evidence folder's are here
    size = write_records(path, header, [*timeline, *files], redacted=True)
    return path, size
