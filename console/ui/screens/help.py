"""The help screen, generated from the action registry (so it always matches the keys)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.ui.app_state import console_app
from console.ui.keys import ACTIONS, display_key, key_for

SCOPE_TITLES = {
    "app": "Everywhere", "fleet": "Fleet overview", "host": "Host screen", "journal": "Journal pane",
    "picker": "Layout picker", "confirm": "Confirmations (switch, stop, restart)", "probe": "Probe (b)", "explore": "Explore (x)",
    "alerts": "Alerts (A)",
}


def help_table(keymap: dict[str, str], readonly: bool) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
    # The key and id columns as wide as their longest entries, the rest for the sentence (wrapping), so
    # the help fits 100 columns without a wide key column eating the text's room.
    shown = [a for a in ACTIONS if not (readonly and a.changes_host)]
    key_w = max(len(display_key(key_for(a.id, keymap))) for a in shown) if shown else 8
    id_w = max([len(a.id) for a in shown] + [len(t) for t in SCOPE_TITLES.values()])
    table.add_column("key", no_wrap=True, width=max(key_w, 8))
    table.add_column("id", no_wrap=True, style="dim", width=id_w)
    table.add_column("what", ratio=1)
    for scope, title in SCOPE_TITLES.items():
        table.add_row("", f"[b not dim]{title}[/]", "")  # in the id column: the key column is narrow
        for a in ACTIONS:
            if a.scope != scope or (readonly and a.changes_host):
                continue
            table.add_row(display_key(key_for(a.id, keymap)), a.id, a.tooltip)
    return table


class HelpScreen(ModalScreen[None]):
    """Every key, from the one registry, with the config remaps applied."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        app = console_app(self)
        keymap = dict(app.keymap)
        readonly = app.readonly
        with VerticalScroll(id="help-box") as box:
            note = " (read-only: changing actions are hidden)" if readonly else ""
            box.border_title = f"keys{note} · ctrl+p opens the command palette · Esc closes"
            yield Static(help_table(keymap, readonly), id="help-table")
