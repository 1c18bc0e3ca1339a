"""The command palette's provider: registry actions, hosts, layout switches and themes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.ui.app_state import console_app
from console.ui.keys import ACTIONS, UiAction


class ConsoleCommands(Provider):
    """`layout: switch to EP8 on demo`, `service: restart`, `host: open demo`, `theme: light`, ..."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        app = console_app(self.screen)
        readonly = app.readonly
        screen = self.screen
        from console.ui.screens.host import HostScreen

        host_screen = screen if isinstance(screen, HostScreen) else None
        for action in ACTIONS:
            if action.palette is None or (readonly and action.changes_host):
                continue
            if action.scope in ("host", "journal") and host_screen is None:
                continue
            yield action.palette, action.tooltip, partial(self._run, action)
        for name in app.hosts:
            yield f"host: open {name}", f"Open the screen of host {name}.", partial(app.open_host, name)
        if not readonly:
            for host in app.hosts.values():
                for service in host.config.services:
                    for layout in service.layouts:
                        yield (
                            f"layout: switch to {layout.name} on {host.name}",
                            f"Switch {service.name} on {host.name} to {layout.name} (asks first).",
                            partial(self._switch, host.name, service.name, layout.name),
                        )
        for theme in app.theme_names:
            yield f"theme: {theme}", f"Use the {theme} theme (themes/{theme}.toml).", partial(app.set_theme, theme)

    def _run(self, action: UiAction) -> None:
        screen = self.screen
        if action.scope == "app":
            self.app.run_action(action.action)
        elif action.scope == "journal":
            screen.query_one("#journal-pane").run_action(action.action)
        else:
            screen.run_action(action.action)

    def _switch(self, host: str, service: str, layout: str) -> None:
        app = console_app(self.screen)
        app.open_host(host)

        def ask() -> None:
            screen = app.host_screen(host)
            if screen is None:
                return
            names = [s.name for s in screen.services]
            if service in names and screen.service.name != service:
                screen.service_index = names.index(service)
                screen.refresh(recompose=True)
            screen.request_switch(layout)

        app.call_after_refresh(ask)

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
