"""The one action registry: every key binding, palette command and help line comes from here.

Each action has a stable id (what `[console.keys]` in hosts.toml remaps), a default key, a short
description for the footer and a tooltip for the help screen and the palette. Actions that change a
host are marked, so `--readonly` hides and refuses all of them in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True, slots=True)
class UiAction:
    """One thing the operator can do."""

    id: str
    """Stable id, used in config to remap the key (`journal.next_finding = "j"`)."""
    key: str
    """Default key(s), comma separated as Textual spells them."""
    action: str
    """The Textual action the key runs, on the widget or screen named by `scope`."""
    description: str
    """Footer label."""
    tooltip: str
    """One sentence for the help screen, the palette and the footer tooltip."""
    scope: str
    """Where it works: app, fleet, host, journal, picker, confirm, probe, explore, alerts."""
    changes_host: bool = False
    """True when it starts, stops or switches something; hidden and refused under --readonly."""
    show: bool = True
    """Shown in the footer."""
    palette: str | None = None
    """The command palette's name for it (`service: restart`), or None to keep it out."""
    everywhere: bool = False
    """Bound with priority, so it works on every screen, modal ones included (a modal screen's keys
    otherwise stop at the modal, and the app's never see it)."""


ACTIONS: tuple[UiAction, ...] = (
    UiAction("app.quit", "q", "quit", "Quit", "Leave the console; the demo stops the units it started.", "app",
             palette="app: quit"),
    UiAction("app.help", "question_mark,f1", "help", "Help", "Show every key and what it does.", "app",
             palette="app: help"),
    UiAction("app.theme", "T", "next_theme", "Theme", "Cycle the colour theme (dark, light, high-contrast).",
             "app", show=False, palette="theme: next"),
    UiAction("app.screenshot", "ctrl+s", "save_screenshot", "Screenshot",
             "Save the screen as an SVG in the current directory (or --screenshot-dir) and say where.", "app",
             show=False, palette="app: screenshot", everywhere=True),
    UiAction("app.fleet", "F", "fleet", "Fleet", "Show the fleet overview of every host.", "app",
             show=False, palette="host: fleet overview"),
    UiAction("app.alerts", "A", "alerts", "Alerts",
             "Show what the watch daemon (serve-console watch) raised: what fired, when, and when it resolved.",
             "app", show=False, palette="alerts: show"),
    UiAction("fleet.open", "enter", "open_host", "Open", "Open the selected host's screen.", "fleet"),
    UiAction("host.back", "escape", "back", "Fleet", "Back to the fleet overview.", "host"),
    UiAction("host.layouts", "l", "layouts", "Layouts",
             "Pick a layout for the service: fit per layout, then switch with confirmation.", "host",
             palette="layout: pick"),
    UiAction("host.restart", "R", "restart_service", "Restart",
             "Restart the running unit (asks first: it is down while it loads); reports READY or FAILED.", "host",
             changes_host=True, palette="service: restart"),
    UiAction("host.stop", "S", "stop_service", "Stop",
             "Stop the running unit (asks first: the service stops serving).", "host",
             changes_host=True, show=False, palette="service: stop"),
    UiAction("host.processes", "p", "toggle_processes", "Procs", "Show or hide GPU memory per process.", "host",
             palette="gpu: toggle per-process memory"),
    UiAction("host.next_service", "tab", "next_service", "Service", "Show the next service of this host.",
             "host", show=False),
    UiAction("host.dismiss", "d", "dismiss_switch", "Dismiss", "Hide the finished switch's panel.", "host",
             show=False),
    UiAction("host.verdict", "v", "switch_verdict", "Verdict",
             "Scroll the switch panel to its verdict (the rollback's outcome under the card), and back.", "host",
             show=False),
    UiAction("host.probe", "b", "probe", "Probe",
             "Benchmark the running layout (TTFT, TPOT, tok/s) after asking: it is production load.", "host",
             changes_host=True, show=False, palette="layout: probe the running layout"),
    UiAction("host.explore", "x", "explore", "Explore",
             "Switch to each picked layout, probe it, compare, and end on the best.", "host",
             changes_host=True, show=False, palette="layout: explore layouts"),
    UiAction("journal.next_finding", "e", "next_finding", "Next finding",
             "Jump to the next triaged line (OOM, NCCL, traceback, error).", "journal",
             palette="journal: next finding"),
    UiAction("journal.prev_finding", "E", "prev_finding", "Prev finding",
             "Jump to the previous triaged line.", "journal", show=False, palette="journal: previous finding"),
    UiAction("journal.filter", "slash", "filter", "Filter",
             "Show only lines matching a regex, or `class:oom` / `class:nccl` / `class:traceback` / "
             "`class:finding`.", "journal",
             palette="journal: filter"),
    UiAction("journal.search", "s", "search", "Search", "Highlight a regex; n and N jump between matches.",
             "journal", show=False, palette="journal: search"),
    UiAction("journal.next_match", "n", "next_match", "Next match", "Jump to the next search match.",
             "journal", show=False),
    UiAction("journal.prev_match", "N", "prev_match", "Prev match", "Jump to the previous search match.",
             "journal", show=False),
    UiAction("journal.copy", "c", "copy_line", "Copy", "Copy the selected line (or the last one).", "journal",
             palette="journal: copy line"),
    UiAction("journal.follow", "G,end", "follow", "Follow", "Jump to the end and follow new lines.",
             "journal", palette="journal: follow"),
    UiAction("journal.clear", "ctrl+l", "clear_filter", "Clear", "Clear the filter, search and cursor.",
             "journal", show=False, palette="journal: clear filter"),
    UiAction("journal.probes", "h", "toggle_probes", "Probes",
             "Show or hide the console's own probe requests (folded by default; the title counts them).",
             "journal", show=False, palette="journal: toggle probe lines"),
    UiAction("picker.switch", "enter", "choose", "Switch", "Open the confirmation for the highlighted layout.",
             "picker", changes_host=True),
    UiAction("picker.cancel", "escape", "cancel", "Cancel", "Close the picker.", "picker"),
    UiAction("confirm.yes", "y", "confirm", "Confirm",
             "Go ahead (refused when the fit check predicts it will not load). Enter presses the focused "
             "button, which starts on Cancel.", "confirm", changes_host=True),
    UiAction("confirm.force", "f", "force", "Force",
             "Switch although the fit check predicts it will not load: the running unit stops, the new one "
             "is expected to fail, then the rollback. The only key that forces.", "confirm", changes_host=True),
    UiAction("confirm.no", "n,escape", "cancel", "Cancel", "Do not do it (Cancel has the focus).", "confirm"),
    UiAction("probe.yes", "y", "confirm", "Probe", "Start the probe.", "probe", changes_host=True),
    UiAction("probe.no", "n,escape", "cancel", "Close", "Close (stops a running probe).", "probe"),
    UiAction("explore.start", "g", "start", "Start", "Start the explore of the picked layouts.", "explore",
             changes_host=True),
    UiAction("alerts.close", "escape", "close", "Back", "Back to the screen before.", "alerts"),
    UiAction("explore.close", "escape", "close", "Close",
             "Close; a running explore stops and leaves a ready layout running.", "explore"),
)

BY_ID = {a.id: a for a in ACTIONS}


def bindings(scope: str, *, priority: bool = False, via: str | None = None) -> list[Binding]:
    """Textual bindings for a scope; `App.set_keymap` remaps them by id.

    Args:
        scope: which actions (app, host, journal, ...).
        priority: checked before the key reaches the focused widget, so the action runs (and moves the
            focus) before the next key is dispatched; the screen's `check_action` lets a text input
            keep its keys.
        via: bind each key to the action `via('name')` instead of `name`: one action of the screen that
            hands the name on to the widget doing the work (the host screen's journal keys).
    """
    return [
        Binding(a.key, f"{via}({a.action!r})" if via else a.action, a.description, show=a.show,
                tooltip=a.tooltip, id=a.id, priority=priority or a.everywhere)
        for a in ACTIONS
        if a.scope == scope
    ]


def scope_actions(scope: str) -> frozenset[str]:
    """Action names of a scope."""
    return frozenset(a.action for a in ACTIONS if a.scope == scope)


def changing_actions(scope: str) -> frozenset[str]:
    """Action names of a scope that change a host (refused under --readonly)."""
    return frozenset(a.action for a in ACTIONS if a.scope == scope and a.changes_host)


def validate_keymap(keys: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Split config remaps into a keymap and one-line complaints about unknown action ids."""
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for action_id, key in keys:
        if action_id in BY_ID:
            keymap[action_id] = key
        else:
            problems.append(f"[console.keys] unknown action {action_id!r}")
    return keymap, problems


def key_for(action_id: str, keymap: Mapping[str, str]) -> str:
    """The key an action answers to now, for help text."""
    return keymap.get(action_id, BY_ID[action_id].key)


def display_key(key: str) -> str:
    names = {"question_mark": "?", "slash": "/", "escape": "Esc", "enter": "Enter", "tab": "Tab"}
    return " / ".join(names.get(k, k) for k in key.split(","))
