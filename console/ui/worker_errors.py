"""A mixin for every node that owns workers: a worker that dies of an error becomes a notification."""

from __future__ import annotations

from typing import cast

from textual.widget import Widget
from textual.worker import Worker, WorkerState


class NotifiesWorkerErrors:
    """Worker state messages do not bubble, so each owner reports its own workers' errors."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            name = event.worker.name or "worker"
            cast(Widget, self).notify(f"{name} stopped: {event.worker.error}", severity="error", timeout=10)
