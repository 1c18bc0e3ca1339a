"""The switch confirmation: names what will be stopped and started; a predicted OOM needs a force."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.config import ServiceConfig
from console.hosts.base import Host
from console.ops.views import ServiceView
from console.ui.app_state import ReachesConsole
from console.ui.keys import bindings, changing_actions
from console.ui.worker_errors import NotifiesWorkerErrors

CHANGING = changing_actions("confirm")
NEEDS_FORCE = ("oom", "invalid")


class ConfirmSwitch(ReachesConsole, NotifiesWorkerErrors, ModalScreen[tuple[str, bool] | None]):
    """Returns (layout, force) or None."""

    BINDINGS = bindings("confirm")

    def __init__(self, host: Host, service: ServiceConfig, layout: str, view: ServiceView | None, *,
                 fit: Any = None, fits: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.host = host
        self.service = service
        self.layout_cfg = service.layout(layout)
        self.layout_name = self.layout_cfg.name if self.layout_cfg else layout
        self.view = view
        self.fit = fit
        # The picker's fits are known once its worker filled them in; chosen earlier, we compute our own.
        self.fit_known = fit is not None or (fits is not None and self.layout_name in fits)
        running = service.layout(view.layout) if view is not None and view.layout else None
        self.is_restart = (running is not None and running.name == self.layout_name
                           and view is not None and view.state is not None and view.state.is_running)
        """The running layout was chosen: the switch stops and starts it again with the same flags."""

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            verb = "restart" if self.is_restart else "switch"
            box.border_title = f"{verb} {self.service.name} → {self.layout_name}"
            yield Static(id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{verb.capitalize()} (y)", id="confirm-yes", variant="primary")
                force = Button("Force (f)", id="confirm-force", variant="error")
                force.can_focus = False  # only the f key (or a click) forces: never Enter, never Tab+Enter
                yield force
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        if self.layout_cfg is None:
            self.notify(f"{self.service.name} has no layout {self.layout_name!r}", severity="error")
            self.dismiss(None)
            return
        self.query_one("#confirm-no", Button).focus()  # Enter presses the focused button: Cancel
        self._show_text()
        if not self.fit_known:
            self.load_fit()

    @work(exclusive=True, exit_on_error=False)
    async def load_fit(self) -> None:
        from console.ops.fit_check import fit_layout, host_capacity

        try:
            self.fit = fit_layout(self.service, self.layout_cfg, await host_capacity(self.host))
        except Exception as exc:
            self.notify(f"fit unknown: {exc}", severity="warning")
        self.fit_known = True
        self._show_text()

    @property
    def needs_force(self) -> bool:
        return self.fit is not None and self.fit.verdict in NEEDS_FORCE

    def _show_text(self) -> None:
        text = Text()
        running = self.view.unit if self.view and self.view.state and self.view.state.is_running else None
        new_unit = self.service.unit_for(self.layout_cfg)
        if self.is_restart:
            text.append(f"Restart {self.layout_name} on {self.host.name}?", style="bold")
            text.append(f"  ({self.service.name} runs it now)\n\n")
        else:
            text.append(f"Switch {self.service.name} on {self.host.name}")
            if self.view and self.view.layout:
                text.append(f" from {self.view.layout}")
            text.append(f" to {self.layout_name}.\n\n")
        if self.is_restart:
            text.append("This restarts ", style="bold")
            text.append(f"{running} (stop, then start with {self.layout_name}'s flags)\n")
        elif running and running != new_unit:
            text.append("This stops   ", style="bold")
            text.append(f"{running}\n")
            text.append("and starts   ", style="bold")
            text.append(f"{new_unit}\n")
        elif running:
            text.append("This restarts ", style="bold")
            text.append(f"{new_unit} with the new layout's flags\n")
        else:
            text.append("This starts  ", style="bold")
            text.append(f"{new_unit}\n")
        text.append("\n")
        err = self.app.theme_variables.get("error", "")
        ok = self.app.theme_variables.get("success", "")
        if not self.fit_known:
            text.append("fit: computing…\n")
        elif self.fit is None:
            text.append("fit: unknown (no model config or GPU capacity)\n")
        else:
            f = self.fit
            style = f"bold {err}" if self.needs_force else f"bold {ok}"
            text.append("fit: ")
            text.append(f.verdict.upper(), style=style)
            text.append(f"  {f.gpus_used} GPUs, weights {f.weights_gib_per_gpu:.2f} GiB/GPU, "
                        f"headroom {f.headroom_gib:+.2f} GiB\n")
            if f.reason:
                text.append(f"     {f.reason}\n")
        if self.needs_force:
            text.append("\nThe fit check predicts this layout will NOT load.\n", style=f"bold {err}")
            stops = f"stops {running} ({self.service.name} stops serving), then " if running else ""
            text.append(f"Forcing {stops}starts {new_unit}, which is expected to fail; the console then rolls "
                        "back to the last ready layout, so the outage lasts until that has loaded again.\n")
            text.append("Press f to force it. Enter and y do not.", style="bold")
        self.query_one("#confirm-text", Static).update(text)
        self.query_one("#confirm-box").set_class(self.needs_force, "-oom")
        self.query_one("#confirm-yes", Button).disabled = self.needs_force or not self.fit_known
        self.query_one("#confirm-force", Button).display = self.needs_force

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHANGING and self.console.readonly:
            return False
        if action == "force":
            return self.needs_force or None
        return True

    def action_confirm(self) -> None:
        if self.console.refuse_readonly("switch"):
            return
        if not self.fit_known:
            return
        if self.needs_force:
            self.notify(f"predicted {self.fit.verdict.upper()}: press f to force", severity="warning")
            return
        self.dismiss((self.layout_name, False))

    def action_force(self) -> None:
        if self.console.refuse_readonly("switch"):
            return
        self.dismiss((self.layout_name, True))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        {"confirm-yes": self.action_confirm, "confirm-force": self.action_force,
         "confirm-no": self.action_cancel}[event.button.id or "confirm-no"]()
