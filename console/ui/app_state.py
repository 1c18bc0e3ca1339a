"""Typed reach from a widget or screen to the console's app, so panes need no `getattr` or ignores.

Widgets and screens see the app through `ConsoleState`, the part of `ConsoleApp` they use. It is a
protocol, not an import of the app, so the app can import its screens without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen

    from console.config import ConsoleConfig, UiConfig
    from console.hosts.base import Host
    from console.ops.audit import AuditLog
    from console.ops.views import FitCache


class ConsoleState(Protocol):
    """What the console's widgets and screens read of the app (`ConsoleApp` has all of it)."""

    config: ConsoleConfig
    ui_config: UiConfig
    hosts: dict[str, Host]
    audit: AuditLog | None
    clock: Callable[[], float]
    fits: FitCache
    readonly: bool
    keymap: dict[str, str]
    theme_names: list[str]

    def refuse_readonly(self, what: str) -> bool: ...

    def open_host(self, name: str) -> None: ...

    def host_screen(self, name: str) -> Any: ...

    def set_theme(self, name: str) -> None: ...

    def call_after_refresh(self, callback: Callable[[], object]) -> bool: ...

    def push_screen(self, screen: Screen[Any], callback: Any = None) -> Any: ...


def console_app(node: DOMNode) -> ConsoleState:
    """The running console (every widget of this package runs inside a `ConsoleApp`)."""
    return cast("ConsoleState", node.app)


class ReachesConsole:
    """Mixin for widgets and screens: `self.console` is the app, typed."""

    @property
    def console(self) -> ConsoleState:
        return console_app(cast("DOMNode", self))
