"""Messages shared between screens and panes (a widget's own messages live in the widget)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class SwitchEvent(Message, bubble=False):
    """One event of a running switch, as the ops layer's `to_json()` dict.

    Progress events fire faster than frames, so a newer progress event replaces a queued one.
    """

    def __init__(self, host: str, event: dict[str, Any]) -> None:
        super().__init__()
        self.host, self.event = host, event

    def can_replace(self, message: Message) -> bool:
        return (
            isinstance(message, SwitchEvent)
            and message.host == self.host
            and self.event.get("event") == "progress"
            and message.event.get("event") == "progress"
        )


class SwitchFinished(Message, bubble=False):
    """The switch ended; `result` is the final `{"event": "result", ...}` dict."""

    def __init__(self, host: str, result: dict[str, Any]) -> None:
        super().__init__()
        self.host, self.result = host, result
