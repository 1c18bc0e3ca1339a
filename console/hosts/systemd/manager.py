"""systemd over a Transport: unit state, actions, console-written files and the journal.

Every command is an argv list (quoted once by the transport); unit names are validated before
they reach a command line. With `sudo=True`, actions (not reads) go through `sudo -n`, and a sudo
that wants a password is reported as exactly that.
"""

from __future__ import annotations

import posixpath
import secrets
from collections.abc import AsyncIterator, Sequence

from console.domain.values import CommandResult, JournalEntry, UnitState
from console.errors import HostError, UsageError
from console.hosts.argv import (
    CommandFailed,
    TransportLost,
    raise_for_result,
    sudo_wrap,
    validate_unit_name,
)
from console.hosts.base import Transport
from console.hosts.systemd.parse import (
    JOURNAL_FIELDS,
    SHOW_PROPERTIES,
    journal_entry_from_json,
    parse_env_file,
    parse_environment,
    unit_state_from_show,
)

_QUICK_S = 30.0
# Plain commands, never `sh -c`: a sudoers rule can then allow exactly these (cat, cp, tee, mv, mkdir).
_NO_SUCH_FILE = "No such file or directory"
_STOP_S = 150.0  # systemd's default TimeoutStopSec is 90 s, plus SIGKILL handling


def journal_argv(unit: str, *, after_cursor: str | None, follow: bool, lines: int | None) -> list[str]:
    """The journalctl command for `journal()`.

    Position: after the cursor if given, else the last `lines` entries, else all of them.
    `journalctl -u` matches both the unit's own output (_SYSTEMD_UNIT=) and systemd's lines about
    it (UNIT= from PID 1).
    """
    argv = [
        "journalctl",
        "-u",
        validate_unit_name(unit),
        "-o",
        "json",
        "--all",
        "--no-pager",
        "--output-fields=" + ",".join(JOURNAL_FIELDS),
    ]
    if follow:
        argv.append("-f")
    if after_cursor is not None:
        argv.append(f"--after-cursor={after_cursor}")
    elif lines is not None:
        argv.append(f"--lines={max(0, int(lines))}")
    elif follow:
        argv.append("--no-tail")
    return argv


def check_managed_path(path: str) -> str:
    """An absolute, normalised path without control characters (files the console writes)."""
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        raise UsageError(f"refusing to write {path!r}: not an absolute, normalised file path")
    if any(ord(ch) < 32 for ch in path):
        raise UsageError(f"refusing to write {path!r}: control characters in the path")
    return path


class SystemdManager:
    """ServiceManager for real systemd, over any Transport (SSH or local)."""

    def __init__(
        self, transport: Transport, *, sudo: bool = False, sudo_units: frozenset[str] = frozenset()
    ) -> None:
        """
        Args:
            transport: where systemctl and journalctl run.
            sudo: run every action through `sudo -n`.
            sudo_units: run actions on just these units through `sudo -n` (services with
                `sudo = true`); file writes and daemon-reload then use sudo too.
        """
        self.transport = transport
        self.sudo = sudo
        self.sudo_units = sudo_units
        self._timestamp_unix = True  # systemd >= 247 knows --timestamp=unix; older ones fall back

    @property
    def host(self) -> str:
        return self.transport.name

    def _sudo_for(self, unit: str | None) -> bool:
        if self.sudo:
            return True
        return bool(self.sudo_units) if unit is None else unit in self.sudo_units

    async def _action(
        self, argv: Sequence[str], what: str, timeout_s: float = _QUICK_S, *, unit: str | None = None
    ) -> CommandResult:
        result = await self.transport.run(sudo_wrap(argv, self._sudo_for(unit)), timeout_s=timeout_s)
        return raise_for_result(self.host, result, what)

    async def state(self, unit: str) -> UnitState:
        """The unit's state from one `systemctl show` call."""
        validate_unit_name(unit)
        props = ",".join(SHOW_PROPERTIES)
        if self._timestamp_unix:
            result = await self.transport.run(
                ["systemctl", "show", "-p", props, "--timestamp=unix", unit], timeout_s=_QUICK_S
            )
            if not result.ok and "timestamp" in result.stderr.lower():
                self._timestamp_unix = False
        if not self._timestamp_unix:
            result = await self.transport.run(["systemctl", "show", "-p", props, unit], timeout_s=_QUICK_S)
        raise_for_result(self.host, result, f"systemctl show {unit}")
        return unit_state_from_show(unit, result.stdout)

    async def reset_failed(self, unit: str) -> None:
        """Clear a failed state and systemd's start-rate counter (a unit that is not loaded is fine)."""
        validate_unit_name(unit)
        result = await self.transport.run(
            sudo_wrap(["systemctl", "reset-failed", unit], self._sudo_for(unit)), timeout_s=_QUICK_S
        )
        if not result.ok and "not loaded" not in result.stderr:
            raise_for_result(self.host, result, f"systemctl reset-failed {unit}")

    async def start(self, unit: str) -> None:
        """reset-failed, then start without waiting for the job (the caller watches state and journal),
        so "Start request repeated too quickly" can never block a switch."""
        await self.reset_failed(unit)
        await self._action(["systemctl", "start", "--no-block", unit], f"systemctl start {unit}", unit=unit)

    async def stop(self, unit: str) -> None:
        """Stop and wait until it has stopped (its GPU memory is free when this returns)."""
        validate_unit_name(unit)
        await self._action(
            ["systemctl", "stop", unit], f"systemctl stop {unit}", timeout_s=_STOP_S, unit=unit
        )

    async def restart(self, unit: str) -> None:
        await self.reset_failed(unit)
        await self._action(
            ["systemctl", "restart", "--no-block", unit],
            f"systemctl restart {unit}",
            timeout_s=_STOP_S,
            unit=unit,
        )

    async def daemon_reload(self) -> None:
        await self._action(["systemctl", "daemon-reload"], "systemctl daemon-reload", timeout_s=_STOP_S)

    async def read_file(self, path: str) -> str | None:
        """A file the console edits (an env file), or None if it does not exist."""
        check_managed_path(path)
        result = await self.transport.run(sudo_wrap(["cat", "--", path], self._sudo_for(None)), timeout_s=_QUICK_S)
        if not result.ok and _NO_SUCH_FILE in result.stderr:
            return None
        raise_for_result(self.host, result, f"reading {path}")
        return result.stdout

    async def write_file(self, path: str, content: str) -> None:
        """Write `content` to a temporary file beside `path` (content on stdin), then rename it over
        `path`, so systemd never reads a half-written file. An existing file's mode and owner carry
        over: the temporary file starts as a `cp -p` copy of it, and `tee` keeps both."""
        check_managed_path(path)
        directory = posixpath.dirname(path)
        tmp = f"{path}.serve-console-{secrets.token_hex(4)}.tmp"
        await self._action(["mkdir", "-p", directory], f"mkdir -p {directory}")
        copied = await self.transport.run(
            sudo_wrap(["cp", "-p", "--", path, tmp], self._sudo_for(None)), timeout_s=_QUICK_S
        )
        if not copied.ok and _NO_SUCH_FILE not in copied.stderr:  # no old file: tee creates it
            raise_for_result(self.host, copied, f"cp -p {path} {tmp}")
        result = await self.transport.run(
            sudo_wrap(["tee", tmp], self._sudo_for(None)), input=content, timeout_s=_QUICK_S
        )
        raise_for_result(self.host, result, f"writing {tmp}")
        try:
            await self._action(["mv", "-f", tmp, path], f"mv {tmp} {path}")
        except HostError:
            await self.transport.run(sudo_wrap(["rm", "-f", tmp], self._sudo_for(None)), timeout_s=_QUICK_S)
            raise

    async def environment(self, unit: str) -> dict[str, str]:
        """The unit's environment as systemd configures it: Environment= plus the readable
        EnvironmentFile= contents (later ones win, as in systemd)."""
        validate_unit_name(unit)
        result = await self.transport.run(
            ["systemctl", "show", "-p", "Environment", "-p", "EnvironmentFiles", unit], timeout_s=_QUICK_S
        )
        raise_for_result(self.host, result, f"systemctl show -p Environment {unit}")
        env: dict[str, str] = {}
        files: list[str] = []
        for line in result.stdout.splitlines():
            key, _, value = line.partition("=")
            if key == "Environment":
                env.update(parse_environment(value))
            elif key == "EnvironmentFiles" and value.strip():
                files.append(value.split(" (")[0].strip())
        for path in files:
            read = await self.transport.run(["cat", "--", path], timeout_s=_QUICK_S)
            if read.ok:
                env.update(parse_env_file(read.stdout))
        return env

    async def last_cursor(self, unit: str) -> str | None:
        """The cursor of the unit's newest journal entry, or None if it has none."""
        result = await self.transport.run(
            journal_argv(unit, after_cursor=None, follow=False, lines=1), timeout_s=_QUICK_S
        )
        raise_for_result(self.host, result, f"journalctl -u {unit}")
        entry = None
        for line in result.stdout.splitlines():
            entry = journal_entry_from_json(line, unit) or entry
        return entry.cursor if entry else None

    async def journal(
        self, unit: str, *, after_cursor: str | None = None, follow: bool = True, lines: int | None = None
    ) -> AsyncIterator[JournalEntry]:
        """Entries of a unit, oldest first, from one `journalctl -o json` channel.

        After a dropped connection it resumes with `--after-cursor` from the last entry it yielded,
        so nothing is lost or repeated. Closing the iterator closes the channel.

        Args:
            unit: the unit.
            after_cursor: start exactly after this entry.
            follow: keep streaming new entries.
            lines: without a cursor, start with the last `lines` entries (None: all of them).
        """
        cursor = after_cursor
        if follow and cursor is None and lines == 0:
            # Anchor "only new entries" to a cursor, so a drop before the first new entry loses
            # nothing: resume after the anchor, or from the start if the unit had no entries yet.
            cursor = await self.last_cursor(unit)
            if cursor is None:
                lines = None
        while True:
            argv = journal_argv(unit, after_cursor=cursor, follow=follow, lines=lines)
            try:
                async for line in self.transport.stream(argv):
                    entry = journal_entry_from_json(line, unit)
                    if entry is None:
                        continue
                    cursor = entry.cursor
                    yield entry
                return
            except TransportLost:
                continue  # the next stream() waits for the reconnect
            except CommandFailed as exc:
                raise HostError(
                    self.host, f"journalctl -u {unit} failed: {exc.result.stderr.strip()[-200:]}"
                ) from None
