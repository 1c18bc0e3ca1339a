"""Typed reach from a widget or screen to the console's app, so panes need no `getattr` or ignores."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from console.ui.app import ConsoleApp


def console_app(node: DOMNode) -> ConsoleApp:
    """The running `ConsoleApp` (every widget of this package runs inside one)."""
    return cast("ConsoleApp", node.app)


class ReachesConsole:
    """Mixin for widgets and screens: `self.console` is the app, typed."""

    @property
    def console(self) -> ConsoleApp:
        return console_app(cast("DOMNode", self))
