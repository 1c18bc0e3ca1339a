"""Evidence before it is lost (docs/evidence.md): one folder per incident in the state dir, with each
engine process's stacks, NCCL RAS's verbose status, each GPU's performance, power and clocks, the
engine's `/metrics`, the units' states and the last 500 lines of every unit's journal on every node.

The stall verdict calls `collect_evidence`; a stop, restart, switch or rollback calls `evidence_before`,
which collects only for a service in an incident the console knows (`incident_of`). `latest_evidence`
is what `status --json` shows as `evidence`.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from pathlib import Path

from console.ops.evidence.collect import EVIDENCE_DEADLINE_S, Evidence, collect_evidence
from console.ops.evidence.folder import (
    FORMAT,
    MANIFEST,
    OK,
    TIMED_OUT,
    UNAVAILABLE,
    evidence_root,
    folder_name,
    latest_for,
)
from console.ops.evidence.incident import Incident, evidence_before, incident_of


def latest_evidence(state_root: Path, host: str, service: str) -> Path | None:
    """The newest finished evidence folder of `service` on `host`, None when there is none."""
    return latest_for(evidence_root(state_root), host, service)


__all__ = [
    "collect_evidence",
    "Evidence",
    "EVIDENCE_DEADLINE_S",
    "evidence_before",
    "evidence_root",
    "folder_name",
    "FORMAT",
    "Incident",
    "incident_of",
    "latest_evidence",
    "MANIFEST",
    "OK",
    "TIMED_OUT",
    "UNAVAILABLE",
]
