"""The question before `S` (stop), `R` (restart) or an explore's `g`: names what it acts on and the outage;
Cancel has the focus."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.domain.safe_text import shown
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings

#: What each verb costs, in the operator's words.
OUTAGE = {
    "stop": "{service} stops serving: every request fails until a layout is started again.",
    "restart": "{service} stops serving until the engine has loaded again (minutes for a large model); "
    "the console then reports READY, or FAILED with its cause.",
    "explore": "{service} switches to each of these layouts in turn and is probed on each: it is down while "
    "each one loads (minutes for a large model) and under benchmark load while it is measured. It ends on "
    "the best one measured; Esc stops it, leaving a ready layout running.",
}


class ConfirmUnitAction(ReachesConsole, ModalScreen[bool]):
    """Asks before stopping or restarting a unit; returns True to go ahead. Enter presses the focused
    button, and the focus starts on Cancel."""

    BINDINGS = bindings("confirm")

    def __init__(self, verb: str, host: str, service: str, unit: str, layout: str | None) -> None:
        """Args:
            verb: stop, restart or explore (a key of OUTAGE).
            unit: the unit it acts on (for an explore, the layouts it goes through).
            layout: the layout running now, if known.
        """
        super().__init__()
        self.verb = verb
        self.host_name = host
        self.service_name = service
        self.unit = unit
        self.layout_name = layout

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box", classes="-oom") as box:
            box.border_title = f"{self.verb} {self.service_name}"
            text = Text()
            text.append(f"{self.verb.capitalize()} {shown(self.unit)} on {shown(self.host_name)}?\n\n", style="bold")
            if self.layout_name:
                text.append(f"It runs {shown(self.layout_name)}. ")
            text.append(OUTAGE[self.verb].format(service=shown(self.service_name)))
            yield Static(text, id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.verb.capitalize()} (y)", id="confirm-yes", variant="error")
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "force":
            return False  # nothing to force here
        if action == "confirm" and self.console.readonly:
            return False
        return True

    def action_confirm(self) -> None:
        if self.console.refuse_readonly(f"{self.verb} {self.unit}"):
            return
        self.dismiss(True)

    def action_force(self) -> None:
        """Not an action here (`check_action` hides it); defined so the shared bindings resolve."""

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm-yes":
            self.action_confirm()
        else:
            self.action_cancel()
