"""Remote commands as argv lists: one central place that quotes, validates and wraps them.

Nothing else in the console builds a shell string. Config values (unit names, paths, layout flags)
only ever travel as separate argv elements, and are quoted exactly once, here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from console.domain.values import CommandResult
from console.errors import HostError, UsageError

#: Unit types systemd knows (the suffix after the last dot).
UNIT_TYPES = frozenset(
    {"service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer", "slice", "scope"}
)
_UNIT_CHARS = r"[A-Za-z0-9:_.\\-]"
# prefix, optional "@instance" (empty instance = the template itself), then ".type"
_UNIT_RE = re.compile(rf"^({_UNIT_CHARS}+?)(@{_UNIT_CHARS}*)?\.([a-z]+)$")
UNIT_NAME_MAX = 255

SUDO_PASSWORD_MARKERS = (
    "a password is required",
    "a terminal is required to read the password",
    "no tty present and no askpass program specified",
)


class UnitNameError(UsageError):
    """A unit name that systemd would not accept (or that could be read as an option)."""


def validate_unit_name(name: str) -> str:
    """Check `name` against systemd's unit-name grammar and return it unchanged.

    Args:
        name: e.g. `sglang-k26-ep8.service` or `sglang@tp4ep2.service`.

    Raises:
        UnitNameError: with a one-line reason.
    """
    if not isinstance(name, str) or not name:
        raise UnitNameError(f"invalid unit name {name!r}: empty")
    if len(name) > UNIT_NAME_MAX:
        raise UnitNameError(f"invalid unit name {name[:40]!r}...: longer than {UNIT_NAME_MAX} characters")
    if name.startswith("-"):
        raise UnitNameError(f"invalid unit name {name!r}: starts with '-'")
    match = _UNIT_RE.match(name)
    if match is None or name.count("@") > 1:
        raise UnitNameError(
            f"invalid unit name {name!r}: systemd allows only letters, digits and ':_.\\-' "
            "(plus one '@' for a template instance) followed by a type suffix such as .service"
        )
    if match.group(3) not in UNIT_TYPES:
        raise UnitNameError(f"invalid unit name {name!r}: unknown unit type .{match.group(3)}")
    return name


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """Validate an argv list: a non-empty sequence of strings without NUL bytes."""
    if isinstance(argv, str | bytes) or not argv:
        raise UsageError(f"a command must be a non-empty argv list, not {argv!r}")
    for arg in argv:
        if not isinstance(arg, str):
            raise UsageError(f"command argument {arg!r} is not a string")
        if "\0" in arg:
            raise UsageError(f"command argument {arg!r} contains a NUL byte")
    return tuple(argv)


def quote_argv(argv: Sequence[str]) -> str:
    """The one shell command string the remote login shell will split back into `argv`."""
    return shlex.join(check_argv(argv))


def sudo_wrap(argv: Sequence[str], sudo: bool) -> list[str]:
    """`argv`, run through non-interactive sudo when `sudo` is set (never prompts)."""
    argv = list(check_argv(argv))
    return ["sudo", "-n", "--", *argv] if sudo else argv


def wants_password(result: CommandResult) -> bool:
    """Whether a `sudo -n` command failed because sudo wanted a password."""
    if result.ok or not result.argv or result.argv[0] != "sudo":
        return False
    err = result.stderr.lower()
    return "sudo:" in err and any(marker in err for marker in SUDO_PASSWORD_MARKERS)


def last_line(text: str) -> str:
    """The last non-empty line of command output, for one-line error messages."""
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()
    return ""


def raise_for_result(host: str, result: CommandResult, what: str) -> CommandResult:
    """Return `result` if it succeeded, else raise a one-line HostError naming the host.

    Args:
        host: the host name, for the message.
        result: the finished command.
        what: what was attempted, e.g. `systemctl start sglang.service`.
    """
    if result.ok:
        return result
    if wants_password(result):
        raise HostError(host, f"sudo needs a password on {host} (use NOPASSWD for systemctl): {what}")
    reason = last_line(result.stderr) or last_line(result.stdout) or f"exit status {result.exit_status}"
    raise HostError(host, f"{what} failed: {reason}")


class CommandFailed(HostError):
    """A streamed command exited non-zero; `result` holds its exit status and stderr tail."""

    def __init__(self, host: str, result: CommandResult) -> None:
        self.result = result
        reason = last_line(result.stderr) or f"exit status {result.exit_status}"
        super().__init__(host, f"{shlex.join(result.argv)[:120]} failed: {reason}")


class TransportLost(HostError):
    """The connection dropped while a command ran; a stream may resume once it is back."""


class LineSplitter:
    """Bytes chunks in, decoded lines out; a runaway line is cut at `max_line_bytes` rather than kept."""

    def __init__(self, max_line_bytes: int = 1 << 20) -> None:
        self._buf = bytearray()
        self._max = max_line_bytes
        self._skipping = False  # inside an over-long line whose head was already emitted

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += chunk
        lines: list[str] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > self._max:
                    if not self._skipping:
                        lines.append(self._buf[: self._max].decode("utf-8", "replace") + " [line cut]")
                    self._skipping = True
                    self._buf.clear()
                return lines
            raw = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            if self._skipping:
                self._skipping = False
                continue
            lines.append(raw.removesuffix(b"\r").decode("utf-8", "replace"))

    def flush(self) -> list[str]:
        """The unterminated last line, if any."""
        rest, self._buf = bytes(self._buf), bytearray()
        if self._skipping or not rest:
            self._skipping = False
            return []
        return [rest.decode("utf-8", "replace")]
