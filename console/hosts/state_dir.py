"""Where the console keeps its own state: simulated units, their journals, the audit log.

The state dir is checked once, when a command first asks for it: it must be a directory the console can
create, write and find free space in. Each fault is one line naming the directory and what to do. The
console's own default directory is kept at mode 0700 (the audit log in it is 0600): it records who
switched what, and the simulated units' journals may carry secrets.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from console.errors import ConsoleError

#: Overrides the platformdirs location; tests always point it at a temporary directory.
STATE_DIR_ENV = "SERVE_CONSOLE_STATE_DIR"
#: Less free space than this is a full disk: SQLite and the journals could not write a switch.
MIN_FREE_BYTES = 1 << 20
_FIX = f"free space or point {STATE_DIR_ENV} at another directory"


class StateDirError(ConsoleError):
    """The state dir cannot be used; the message names it and what to do (exit status 1)."""


def state_dir() -> Path:
    """The console's state directory, created (mode 0700) if missing, and checked.

    `SERVE_CONSOLE_STATE_DIR` wins; otherwise platformdirs' user state dir (`~/.local/state/serve-console`).

    Raises:
        StateDirError: it cannot be created, is not writable, or its disk is full.
    """
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        path = Path(override).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_state_dir("serve-console"))
    return check_state_dir(path, own=not override)


def check_state_dir(path: Path, *, own: bool = True) -> Path:
    """Create `path` if missing and make sure the console can write there.

    Args:
        path: the directory.
        own: it is the console's own directory: tighten it to 0700 if it is looser (never done to a
            directory named by SERVE_CONSOLE_STATE_DIR, which may be shared, unless the console made it).

    Raises:
        StateDirError: one line naming the directory and what to do.
    """
    created = not path.exists()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise StateDirError(f"state dir {path}: exists and is not a directory; {_FIX}") from None
    except OSError as exc:
        raise StateDirError(f"state dir {path}: cannot create it ({exc.strerror}); {_FIX}") from None
    if not path.is_dir():
        raise StateDirError(f"state dir {path}: not a directory; {_FIX}")
    if own or created:
        _tighten(path)
    try:
        probe_write(path)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StateDirError(f"state dir {path}: the disk is full; {_FIX}") from None
        raise StateDirError(
            f"state dir {path}: not writable ({exc.strerror}); make it writable for this user or "
            f"point {STATE_DIR_ENV} at another directory"
        ) from None
    free = disk_free_bytes(path)
    if free is not None and free < MIN_FREE_BYTES:
        raise StateDirError(f"state dir {path}: the disk is full ({free // 1024} KiB free); {_FIX}")
    return path


def _tighten(path: Path) -> None:
    """Mode 0700 for a directory this user owns (others may not read the audit log or the journals)."""
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
    except OSError:
        pass  # a directory we cannot chmod is still usable; the write probe decides


def probe_write(path: Path) -> None:
    """Create and remove one small file in `path`; the OSError says why it cannot be written."""
    fd, name = tempfile.mkstemp(prefix=".serve-console-probe-", dir=path)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
        os.unlink(name)


def disk_free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged user may still write on the file system of `path` (None if unknown)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def sim_host_dir(root: Path, host: str) -> Path:
    """The directory of one simulated host inside the state dir."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in host) or "_"
    return root / "hosts" / safe
