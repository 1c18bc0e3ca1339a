"""The console App: built from hosts handed in by the caller (the backend seam), one screen per host.

Tests build it from simulated hosts; `serve-console` builds it from hosts.toml; `--demo` from the
packaged demo cluster. The App itself never opens a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel

from console.config import ConsoleConfig, UiConfig
from console.domain.safe_text import shown
from console.hosts.base import Host
from console.ops.audit import AuditLog
from console.ops.status import kill_started_units, running_units
from console.ops.views import FitCache, ServingCache
from console.shutdown import SHUTDOWN, on_ending_signals
from console.ui.gc_pauses import GcPauses
from console.ui.keys import BY_ID, bindings, validate_keymap
from console.ui.palette import ConsoleCommands
from console.ui.themes import load_themes
from console.ui.worker_errors import NotifiesWorkerErrors

#: The layout `--demo` brings up first when nothing runs, as in the Kimi K2.6 story.
DEMO_FIRST_LAYOUT = "EP8"
#: Seconds after the first frame when the startup objects are frozen out of the collector's full passes.
GC_FREEZE_AFTER_S = 0.2


class ConsoleApp(NotifiesWorkerErrors, App[None]):
    """serve-console: fleet overview, a screen per host, switches with live triage."""

    TITLE = "serve-console"
    CSS_PATH = "console.tcss"
    BINDINGS: list[Binding] = bindings("app")  # type: ignore[assignment]
    # Only the console's own commands: Textual's system provider added a second Quit, a second theme
    # picker and its 24 built-in themes.
    COMMANDS = {ConsoleCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        config: ConsoleConfig,
        readonly: bool = False,
        theme: str | None = None,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.time,
        auto_open: bool = True,
        demo_start: bool = False,
        demo: bool = False,
        stop_started_units: bool = False,
        notices: Sequence[str] = (),
        screenshot_dir: str | Path | None = None,
    ) -> None:
        """Args:
            hosts: the hosts to show, already built (real, simulated, or fixed-data for tests).
            config: the loaded config (its `ui` table sets line cap, refresh, theme, keys).
            readonly: hide and refuse every action that changes a host.
            theme: theme name overriding the config's.
            audit: the switch audit log (history, last ready layout); None keeps no history.
            clock: wall clock for data ages; tests pass a frozen one.
            auto_open: with a single host, open its screen straight away.
            demo_start: bring the demo's first layout up when nothing runs (the story's first act).
            demo: this is the demo cluster: open the host of its first layout (the fleet one Esc away).
            stop_started_units: on exit, stop every unit that runs now but did not at start (the demo).
            notices: lines to show as notifications once the app runs (the demo moved to a free port).
            screenshot_dir: where ctrl+s saves its SVG (default: the current directory).
        """
        super().__init__()
        self.hosts = {h.name: h for h in hosts}
        self.config = config
        self.ui_config: UiConfig = config.ui
        self.readonly = readonly or config.ui.readonly
        self.clock = clock
        self.audit = audit
        self.fits = FitCache()
        """Predicted fits per layout, read once for the app's life (the service panes show them)."""
        self.serving = ServingCache()
        """Each service's progress, followed while the console is open (docs/stalls.md), with its canary."""
        self.auto_open = auto_open
        self.demo = demo or demo_start
        self.demo_host = self._demo_host() if self.demo else None
        """The demo's host of its first layout (opened at start, brought up by `demo_start`), else None."""
        self.theme_names: list[str] = []
        self._wanted_theme = theme or config.ui.theme
        self.keymap_problems: list[str] = []
        self.keymap: dict[str, str] = {}
        """The config's key remaps by action id, as the help screen shows them."""
        self.sub_title = "read-only" if self.readonly else ""
        self.demo_start = demo_start
        self.stop_started_units = stop_started_units
        self._units_at_start: set[tuple[str, str]] | None = None
        self.notices = list(notices)
        self.screenshot_dir = Path(screenshot_dir) if screenshot_dir is not None else Path.cwd()
        self.gc_pauses = GcPauses()

    def get_driver_class(self):
        from textual.drivers.linux_driver import LinuxDriver

        from console.ui.terminal_driver import ConsoleDriver

        driver = super().get_driver_class()
        return ConsoleDriver if driver is LinuxDriver else driver  # the web's driver stays the web's

    def get_default_screen(self):
        from console.ui.screens.fleet import FleetScreen

        return FleetScreen()

    def on_mount(self) -> None:
        if not self.is_headless:
            # A closed terminal (SIGHUP) or a kill (SIGTERM) still ends the app the orderly way, so the
            # demo stops its units and connections close.
            # The shutdown's deadline starts with the signal; a second one exits at once.
            on_ending_signals(asyncio.get_running_loop(), self.exit)
        self._install_themes()
        self.keymap, self.keymap_problems = validate_keymap(self.ui_config.keys)
        self.set_keymap(self.keymap)
        for problem in self.keymap_problems:
            self.notify(problem, severity="warning")
        for notice in self.notices:
            self.notify(notice, severity="warning", timeout=10)
        if self.auto_open and (len(self.hosts) == 1 or self.demo_host is not None):
            self.open_host(self.demo_host or next(iter(self.hosts)))  # the fleet stays one Esc away
        if self.stop_started_units or self.demo_start:
            self._note_running_units()
        # Once the first frame is out (the freeze's one collection must not delay it), freeze what exists.
        self.call_after_refresh(lambda: self.set_timer(GC_FREEZE_AFTER_S, self.gc_pauses.freeze_startup))

    @work(exclusive=True, group="app-start", exit_on_error=False)
    async def _note_running_units(self) -> None:

        self._units_at_start = at_start = await running_units(self.hosts.values())
        if self.stop_started_units and not self.readonly:  # past the shutdown's deadline, killed
            SHUTDOWN.last_resort("the demo's units", lambda: kill_started_units(self.hosts.values(), at_start))
        if self.demo_start and self.demo_host is not None and not self._units_at_start:
            screen = self.host_screen(self.demo_host)
            for _ in range(100):  # the screen was pushed in on_mount; wait until it is composed
                if screen is None or screen.is_mounted:
                    break
                await asyncio.sleep(0.05)
            layout = screen.service.layout(DEMO_FIRST_LAYOUT) if screen is not None else None
            if screen is not None and layout is not None:
                screen.start_switch(layout.name, False)

    def _demo_host(self) -> str | None:
        """The host whose service the demo brings up first (the story's EP8), in config order."""
        return next((name for name, host in self.hosts.items()
                     if any(s.layout(DEMO_FIRST_LAYOUT) for s in host.config.services)), None)

    async def on_unmount(self) -> None:
        """Stop what the demo started (no orphan engines), then close every host."""

        self.gc_pauses.restore()
        self.serving.close()
        if self.stop_started_units and not self.readonly and self._units_at_start is not None:
            # Every unit that did not run at start is stopped, not only those that run now: a start still
            # in flight (the demo's first switch, a key pressed just before the end) has no state yet, and
            # landed after the check, an orphan. A stop waits for the start under the unit's lock; a stop
            # of a unit that never ran is nothing.
            with contextlib.suppress(Exception):
                configured = {(name, unit) for name, host in self.hosts.items()
                              for service in host.config.services for unit in service.all_units()}
                for host_name, unit in sorted(configured - self._units_at_start):
                    with contextlib.suppress(Exception), SHUTDOWN.stopping(f"{unit} on {host_name}"):
                        async with asyncio.timeout(15):
                            await self.hosts[host_name].services.stop(unit)
        for host in self.hosts.values():
            with contextlib.suppress(Exception), SHUTDOWN.stopping(f"host {host.name} (its connections)"):
                async with asyncio.timeout(5):
                    await host.close()
            for probe in host.probes.values():  # not every host lists its probes among its closers
                close = getattr(probe, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception), SHUTDOWN.stopping(f"host {host.name}'s probes"):
                        async with asyncio.timeout(5):
                            await close()

    def _install_themes(self) -> None:
        try:
            themes = load_themes()
        except Exception as exc:  # a broken theme file is a notification, not a crash
            self.notify(str(exc), severity="error")
            themes = {}
        for theme in themes.values():
            self.register_theme(theme)
        self.theme_names = list(themes)
        self.set_theme(self._wanted_theme)

    def set_theme(self, name: str) -> None:
        """Switch to a theme file by name; an unknown name is a notification."""
        if name in self.theme_names:
            self.theme = name
        elif self.theme_names:
            self.notify(f"unknown theme {name!r}; have {', '.join(self.theme_names)}", severity="warning")
            self.theme = self.theme_names[0]

    # -- navigation ----------------------------------------------------------------------------------
    def open_host(self, name: str) -> None:
        """Show a host's screen (installed once, so its switch keeps running while you look elsewhere)."""
        from console.ui.screens.host import HostScreen

        if name not in self.hosts:
            self.notify(f"no host {name!r}", severity="error")
            return
        screen_name = f"host:{name}"
        if not self.is_screen_installed(screen_name):
            self.install_screen(HostScreen(self.hosts[name]), name=screen_name)
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(screen_name)

    def host_screen(self, name: str):
        """The host's screen if it was opened."""
        screen_name = f"host:{name}"
        return self.get_screen(screen_name) if self.is_screen_installed(screen_name) else None

    # -- app actions (from the registry) -------------------------------------------------------------
    def action_help(self) -> None:
        from console.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        if not self.theme_names:
            return
        i = self.theme_names.index(self.theme) if self.theme in self.theme_names else -1
        self.set_theme(self.theme_names[(i + 1) % len(self.theme_names)])
        self.notify(f"theme {self.theme}", timeout=2)

    def action_save_screenshot(self) -> None:
        """Save the screen as SVG and say where; a folder that cannot take it is said in one line too.

        On the web the SVG goes to the visitor's browser as a download (textual-serve's /download/), held
        in memory until fetched: a visitor, read-only or not, writes nothing on the server's disk."""
        if self.is_web:
            name = f"serve-console-{time.strftime('%Y%m%d-%H%M%S')}.svg"
            self.deliver_text(io.StringIO(self.export_screenshot()), save_filename=name, mime_type="image/svg+xml")
            self.notify(f"screenshot sent to your browser as {name}", timeout=6)
            return
        try:
            self.screenshot_dir.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(self.screenshot_dir))
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc.strerror or exc} ({self.screenshot_dir})", severity="error")
            return
        self.notify(f"screenshot saved to {path}", timeout=6)

    def action_fleet(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def action_alerts(self) -> None:
        """The watch daemon's alerts, from the state file (Esc goes back)."""
        from console.ui.screens.alerts import AlertsScreen

        if not isinstance(self.screen, AlertsScreen):
            self.push_screen(AlertsScreen())

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (errors quote hosts) is shown through the sanitiser and redaction, as plain
        text: host text can neither drive the terminal nor pass for markup."""
        kwargs = {} if timeout is None else {"timeout": timeout}
        super().notify(shown(message), title=shown(title), severity=severity, markup=False, **kwargs)

    def refuse_readonly(self, what: str) -> bool:
        """True (and a notification) when read-only mode forbids `what`."""
        if self.readonly:
            self.notify(f"read-only mode: {what} refused", severity="warning")
            return True
        return False

    def action_description(self, action_id: str) -> str:
        return BY_ID[action_id].tooltip
