"""What the simulated systemd loaded of a unit's files at the last daemon-reload: its restart policy.

A real unit says `Restart=always` and `RestartSec=2` in its file or a drop-in (`systemctl edit UNIT`); the
simulated host reads the same keys from its drop-ins (`/etc/systemd/system/UNIT.d/*.conf`, and a
template's `NAME@.service.d/` for every instance) at daemon-reload and records them here, in the unit's
directory, where its supervisor reads them when the unit starts.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

LOADED_FILE = "loaded-unit.json"
RESTART_POLICIES = ("no", "always", "on-failure")
#: systemd's default RestartSec= (100 ms).
DEFAULT_RESTART_SEC = 0.1
_SPAN = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|m|min)?\s*")
_UNIT_SECONDS = {None: 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0}


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """`Restart=` and `RestartSec=` as systemd reads them."""

    restart: str = "no"
    restart_sec: float = DEFAULT_RESTART_SEC

    def restarts_after(self, clean: bool) -> bool:
        """Whether the unit starts again after its main process ended on its own (not stopped)."""
        return self.restart == "always" or (self.restart == "on-failure" and not clean)


def parse_time_span(text: str) -> float | None:
    """`100ms`, `2`, `2s`, `1min` in seconds; None if it is not one of those."""
    m = _SPAN.fullmatch(text)
    return None if m is None else float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def restart_settings(texts: list[str]) -> RestartPolicy:
    """The policy a unit's drop-ins set, later files overriding earlier ones; unreadable values ignored."""
    restart, restart_sec = "no", DEFAULT_RESTART_SEC
    for text in texts:
        for raw in text.split("\n"):
            key, sep, value = raw.strip().partition("=")
            value = value.strip()
            if not sep:
                continue
            if key == "Restart" and value in RESTART_POLICIES:
                restart = value
            elif key == "RestartSec" and (span := parse_time_span(value)) is not None:
                restart_sec = span
    return RestartPolicy(restart, restart_sec)


def write_loaded(unit_dir: Path, policy: RestartPolicy) -> None:
    unit_dir.mkdir(parents=True, exist_ok=True)
    tmp = unit_dir / f".{LOADED_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(policy)))
    os.replace(tmp, unit_dir / LOADED_FILE)


def read_loaded(unit_dir: Path) -> RestartPolicy:
    """The policy loaded at the last daemon-reload; the default (no restart) when there was none."""
    try:
        raw = json.loads((unit_dir / LOADED_FILE).read_text())
        return RestartPolicy(str(raw["restart"]), float(raw["restart_sec"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return RestartPolicy()
