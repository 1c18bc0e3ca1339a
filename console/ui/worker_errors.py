"""A mixin for every node that owns workers: a worker that dies of an error becomes a notification."""

from __future__ import annotations

from typing import cast

from textual.widget import Widget
from textual.worker import Worker, WorkerState

from console.domain.safe_text import shown


class NotifiesWorkerErrors:
    """Worker state messages do not bubble, so each owner reports its own workers' errors."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            name = event.worker.name or "worker"
            # The error may quote a host: shown as plain text whatever app hosts the widget.
            text = shown(f"{name} stopped: {event.worker.error}")
            cast(Widget, self).notify(text, severity="error", timeout=10, markup=False)
