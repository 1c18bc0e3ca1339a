"""Failure triage of engine logs: what killed the engine, and every finding on the way.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.domain.triage.catalogue import OPEN, WEIGHTS_OOM_HINT, tier_of
from console.domain.triage.root_cause import as_engine_error, decisive
from console.domain.triage.triager import Triager
from console.domain.triage.xid import xid_findings

__all__ = [
    "as_engine_error",
    "decisive",
    "OPEN",
    "tier_of",
    "WEIGHTS_OOM_HINT",
    "Triager",
    "xid_findings",
]
