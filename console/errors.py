"""Errors that the CLI turns into one line and an exit code, never a traceback."""

from __future__ import annotations


class ConsoleError(Exception):
    """A failure the user can act on; the message is one line."""

    exit_code = 1


class UsageError(ConsoleError):
    """Bad arguments or bad input (exit code 2)."""

    exit_code = 2


class ConfigError(UsageError):
    """A config file problem; the message starts with `file:line:`."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class HostError(ConsoleError):
    """A host could not be reached or refused an operation; the message names the host."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(f"{host}: {message}")
