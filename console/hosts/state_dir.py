"""Where the console keeps its own state: simulated units, their journals, the audit log."""

from __future__ import annotations

import os
from pathlib import Path

#: Overrides the platformdirs location; tests always point it at a temporary directory.
STATE_DIR_ENV = "SERVE_CONSOLE_STATE_DIR"


def state_dir() -> Path:
    """The console's state directory, created if missing.

    `SERVE_CONSOLE_STATE_DIR` wins; otherwise platformdirs' user state dir (`~/.local/state/serve-console`).
    """
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        path = Path(override).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_state_dir("serve-console"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sim_host_dir(root: Path, host: str) -> Path:
    """The directory of one simulated host inside the state dir."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in host) or "_"
    return root / "hosts" / safe
