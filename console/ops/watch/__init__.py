"""The unattended watch daemon: hosts observed, alerts raised and resolved, delivered to Alertmanager and a
webhook, remembered in the state file.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.watch.daemon import WatchDaemon, transition_line
from console.ops.watch.delivery import ALERTMANAGER, WEBHOOK, Deliverer, Sink, webhook_document
from console.ops.watch.destinations import build_sinks
from console.ops.watch.lock import WatchLock, WatchLocked
from console.ops.watch.observe import LOOKBACK_ENTRIES, HostObserver, RankSource
from console.ops.watch.outbox import Outbox
from console.ops.watch.rank_source import rank_liveness
from console.ops.watch.recording import HostRecording, record_folder
from console.ops.watch.store import AlertStore, Delivery, open_alert_store

__all__ = [
    "HostRecording",
    "record_folder",
    "ALERTMANAGER",
    "AlertStore",
    "build_sinks",
    "Deliverer",
    "Delivery",
    "HostObserver",
    "LOOKBACK_ENTRIES",
    "open_alert_store",
    "Outbox",
    "rank_liveness",
    "RankSource",
    "Sink",
    "transition_line",
    "WatchDaemon",
    "WatchLock",
    "WatchLocked",
    "WEBHOOK",
    "webhook_document",
]
