"""One incident's evidence folder in the state dir: its name, its parts' files, its manifest (docs/evidence.md).

`<state dir>/evidence/<stamp>-<host>-<service>-<id>/`, where the stamp is the incident's own start (UTC)
and the id a hash of the host, the service and the incident's key, so every console that meets the same
incident (the TUI, the CLI, the watch daemon) finds the same folder and collects it once. The folder is
made with `mkdir`: the first collector wins, a second one waits for its manifest. Each part is one file,
redacted as the journal is shown (domain/redact.py), cut at MAX_PART_BYTES; `manifest.json` is written
last, atomically, so a folder without one is a collection under way. KEEP_FOLDERS folders are kept,
the oldest removed first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.domain.redact import redact

FORMAT = "serve-console-evidence/1"
MANIFEST = "manifest.json"
#: The most one part's file holds; a longer text is cut, and its manifest entry says so.
MAX_PART_BYTES = 2 << 20
#: The most a whole folder holds: parts written after it is reached are cut to nothing, and said so.
MAX_FOLDER_BYTES = 24 << 20
#: Evidence folders kept in the state dir (the oldest go first).
KEEP_FOLDERS = 32
#: A folder of the same unit begun this long before an incident's start is that incident's: the watch
#: daemon collects at the fatal line, a stop after it sees the unit failed a moment later.
SAME_INCIDENT_S = 60.0
OK, TIMED_OUT, UNAVAILABLE = "ok", "timed-out", "unavailable"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a host, service or unit name."""
    return _SAFE.sub("_", text).strip("._") or "_"


def evidence_root(state_root: Path) -> Path:
    return state_root / "evidence"


def incident_id(host: str, service: str, key: str) -> str:
    return hashlib.sha256(f"{host}\0{service}\0{key}".encode()).hexdigest()[:12]


def folder_name(host: str, service: str, key: str, since: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(since))
    return f"{stamp}-{safe_name(host)}-{safe_name(service)}-{incident_id(host, service, key)}"


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of evidence: its file in the folder, or why there is none."""

    name: str
    """units, journal, stacks, ras, gpus, metrics"""
    node: str
    status: str
    """ok, timed-out or unavailable"""
    file: str | None = None
    why: str | None = None
    bytes: int = 0
    truncated: bool = False
    took_s: float = 0.0
    unit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "unit": self.unit, "status": self.status,
                "file": self.file, "why": self.why, "bytes": self.bytes, "truncated": self.truncated,
                "took_s": round(self.took_s, 3)}


@dataclass
class Folder:
    """An evidence folder being written."""

    path: Path
    written_bytes: int = 0
    parts: list[Part] = field(default_factory=list)

    def write_text(self, file: str, text: str) -> tuple[int, bool]:
        """Write one part's text, redacted and bounded; (bytes written, whether it was cut)."""
        data = "\n".join(redact(line) for line in text.splitlines()).encode("utf-8", "replace")
        if text.endswith("\n"):
            data += b"\n"
        room = max(0, min(MAX_PART_BYTES, MAX_FOLDER_BYTES - self.written_bytes))
        cut = len(data) > room
        if cut:
            data = data[:room] + f"\n[cut: {len(data) - room} more bytes not kept]\n".encode()
        (self.path / file).write_bytes(data)
        os.chmod(self.path / file, 0o600)
        self.written_bytes += len(data)
        return len(data), cut

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path / MANIFEST)


def claim(root: Path, name: str) -> Folder | None:
    """Make the incident's folder; None when another collector made it first."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = root / name
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return None
    return Folder(path)


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def prune(root: Path, keep: int = KEEP_FOLDERS) -> None:
    """Remove the oldest folders past `keep` (by name: the stamp leads it)."""
    with contextlib.suppress(OSError):
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        for old in folders[: max(0, len(folders) - keep)]:
            shutil.rmtree(old, ignore_errors=True)


def latest_for(root: Path, host: str, service: str) -> Path | None:
    """The newest finished evidence folder of one service on one host, None when there is none."""
    marker = f"-{safe_name(host)}-{safe_name(service)}-"
    with contextlib.suppress(OSError):
        for path in sorted((p for p in root.iterdir() if marker in p.name), reverse=True):
            manifest = read_manifest(path)
            if manifest is not None and manifest.get("host") == host and manifest.get("service") == service:
                return path
    return None


def recent_of_unit(root: Path, host: str, service: str, unit: str, after: float) -> Path | None:
    """The newest finished folder of `unit` begun after `after`."""
    marker = f"-{safe_name(host)}-{safe_name(service)}-"
    with contextlib.suppress(OSError):
        for path in sorted((p for p in root.iterdir() if marker in p.name), reverse=True):
            manifest = read_manifest(path)
            if (manifest is not None and manifest.get("host") == host and manifest.get("service") == service
                    and manifest.get("unit") == unit and manifest.get("started_at", 0.0) >= after):
                return path
    return None
