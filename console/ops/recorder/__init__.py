"""The rolling record (docs/recorder.md): per host a bounded, compressed record on one clock of what
the watch daemon and the TUI saw (unit states, journal lines, engine and GPU samples, health, switch
events, verdicts), from which the incidents' bundles are cut.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.recorder.incident import KINDS, incident_records, write_incident_bundle
from console.ops.recorder.segments import (
    CAP_BYTES,
    FLUSH_S,
    RecordWriter,
    folder_size,
    list_segments,
    read_segment,
    read_window,
)

__all__ = [
    "CAP_BYTES",
    "FLUSH_S",
    "folder_size",
    "incident_records",
    "KINDS",
    "list_segments",
    "read_segment",
    "read_window",
    "RecordWriter",
    "write_incident_bundle",
]
