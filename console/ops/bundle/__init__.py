"""Incident bundles (docs/bundle.md): one file per incident, the journal of every unit of the service on
every node around it, the units' states, the switch's events and verdict, the failure card and the
evidence folder, on one clock, redacted as the journal is. A failed switch writes one (`write_bundle`);
`triage BUNDLE` and `replay BUNDLE` read one (`read_bundle`); `redact_hosts` makes a copy for sharing.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.bundle.fileformat import (
    FORMAT,
    TIMELINE,
    Bundle,
    BundleError,
    latest_bundle,
    read_bundle,
    redact_hosts,
    write_records,
)
from console.ops.bundle.record import (
    AFTER_S,
    BEFORE_S,
    WRITE_DEADLINE_S,
    Incident,
    bundle_path,
    bundles_root,
    evidence_records,
    write_bundle,
)

__all__ = [
    "AFTER_S",
    "BEFORE_S",
    "Bundle",
    "BundleError",
    "bundle_path",
    "bundles_root",
    "evidence_records",
    "FORMAT",
    "Incident",
    "latest_bundle",
    "read_bundle",
    "redact_hosts",
    "TIMELINE",
    "write_bundle",
    "write_records",
    "WRITE_DEADLINE_S",
]
