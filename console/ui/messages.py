"""Messages shared between screens and panes (a widget's own messages live in the widget)."""

from __future__ import annotations

from textual.message import Message

from console.ops.switch import ProgressEvent, SwitchEvent, SwitchResult


class SwitchNews(Message, bubble=False):
    """One typed event of a running switch, or (`final`) the switch's whole result.

    Progress events fire faster than frames, so a newer progress event replaces a queued one.
    """

    def __init__(self, host: str, event: SwitchEvent | SwitchResult) -> None:
        super().__init__()
        self.host, self.event = host, event

    @property
    def final(self) -> SwitchResult | None:
        """The switch's result, when this message says that it ended."""
        return self.event if isinstance(self.event, SwitchResult) else None

    def can_replace(self, message: Message) -> bool:
        return (
            isinstance(message, SwitchNews)
            and message.host == self.host
            and isinstance(self.event, ProgressEvent)
            and isinstance(message.event, ProgressEvent)
        )
