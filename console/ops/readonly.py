"""Read-only mode as one property: every command that changes a host asks `require_writable` first.

Read-only comes from the config (`[console] readonly = true`) or from the global `--readonly` flag,
before or after the subcommand. A refusal is one line naming read-only mode, exit status 1.
"""

from __future__ import annotations

from console.config import ConsoleConfig
from console.errors import ConsoleError


class ReadOnlyRefused(ConsoleError):
    """An action that changes a host, refused because the console runs read-only (exit status 1)."""

    exit_code = 1


def is_readonly(config: ConsoleConfig | None, flag: bool) -> bool:
    """True when the flag or the config's `[console] readonly` says so."""
    return bool(flag) or bool(config is not None and config.ui.readonly)


def require_writable(config: ConsoleConfig | None, flag: bool, what: str) -> None:
    """Refuse `what` (e.g. "switch EP8 on gpu1/k26") in read-only mode.

    Raises:
        ReadOnlyRefused: the flag or the config makes this console read-only.
    """
    if flag:
        raise ReadOnlyRefused(f"read-only mode (--readonly): refusing to {what}")
    if config is not None and config.ui.readonly:
        raise ReadOnlyRefused(f"read-only mode (readonly = true in {config.path}): refusing to {what}")
