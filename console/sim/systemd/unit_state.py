"""A simulated unit's state file (`state.json`), written by its supervisor, read by any console."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.domain.values import UnitState
from console.hosts.procfs import pid_alive


def write_state(unit_dir: Path, state: dict) -> None:
    """Replace the unit's state file atomically."""
    tmp = unit_dir / f".state.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, sort_keys=True))
    os.replace(tmp, unit_dir / "state.json")


def read_state(unit_dir: Path) -> dict | None:
    """The unit's raw state, or None if it never ran."""
    try:
        return json.loads((unit_dir / "state.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def supervisor_alive(raw: dict) -> bool:
    return pid_alive(raw.get("supervisor_pid"), raw.get("supervisor_start"))


def unit_state_from(unit: str, raw: dict | None, *, loaded: bool = True) -> UnitState:
    """The UnitState a raw state file means, correcting it when its supervisor died unseen (kill -9)."""
    if not loaded:
        return UnitState(unit=unit, active="inactive", sub="dead", load="not-found")
    if raw is None:
        return UnitState(unit=unit, active="inactive", sub="dead", load="loaded")
    active, sub, result = raw.get("active", "inactive"), raw.get("sub", "dead"), raw.get("result")
    if active in ("activating", "active", "deactivating") and not supervisor_alive(raw):
        active, sub, result = "failed", "failed", "signal"
    return UnitState(
        unit=unit,
        active=active,
        sub=sub,
        result=result,
        load="loaded",
        main_pid=raw.get("main_pid") if active != "failed" else None,
        exec_main_status=raw.get("exec_main_status"),
        n_restarts=raw.get("n_restarts"),
        since=raw.get("since"),
    )
