"""Parsing what systemctl and journalctl print into the console's values (pure, no I/O)."""

from __future__ import annotations

import calendar
import json
import re
import shlex
import time
from datetime import datetime

from console.domain.safe_text import printable
from console.domain.values import JournalEntry, UnitState

#: The properties `state()` asks for, in one `systemctl show` call.
SHOW_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainStatus",
    "NRestarts",
    "MainPID",
    "StateChangeTimestamp",
    "ActiveEnterTimestamp",
    "InactiveEnterTimestamp",
)

#: Journal fields we use; cursor and timestamps always come with `-o json`.
JOURNAL_FIELDS = ("MESSAGE", "_PID", "PRIORITY", "_COMM", "_SYSTEMD_UNIT", "UNIT", "SYSLOG_IDENTIFIER")

_DEFAULT_TS = re.compile(
    r"^(?:[A-Za-z]{3} )?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(\.\d+)?(?: ([A-Za-z][A-Za-z0-9+\-/_]*|[+-]\d{2}:?\d{2}))?$"
)


def parse_show(text: str) -> dict[str, str]:
    """`Key=Value` lines into a dict (values may contain '=')."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:  # values are host text (a unit's Id, Result): shown, so made printable here
            props[key.strip()] = printable(value.strip())
    return props


def parse_timestamp(value: str | None) -> float | None:
    """A systemd timestamp as POSIX seconds, or None when unset or unreadable.

    Accepts `--timestamp=unix` (`@1732870000`), `--timestamp=us` and the default format
    (`Sun 2026-11-29 09:08:00 UTC`); a zone other than UTC/GMT or a numeric offset is read as the
    console's local time (systemctl prints the host's zone; good enough for "since" displays).
    """
    if not value or value in ("n/a", "0"):
        return None
    value = value.strip()
    if value.startswith("@"):
        try:
            seconds = float(value[1:])
        except ValueError:
            return None
        return seconds if seconds > 0 else None
    match = _DEFAULT_TS.match(value)
    if match is None:
        return None
    base, fraction, zone = match.groups()
    try:
        parsed = datetime.strptime(base, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    frac = float(fraction) if fraction else 0.0
    if zone and re.fullmatch(r"[+-]\d{2}:?\d{2}", zone):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset_s = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        return calendar.timegm(parsed.timetuple()) - offset_s + frac
    if zone in ("UTC", "GMT", "Z", "UCT"):
        return calendar.timegm(parsed.timetuple()) + frac
    return time.mktime(parsed.timetuple()) + frac


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "", "[not set]") else None
    except ValueError:
        return None


def unit_state_from_show(unit: str, text: str) -> UnitState:
    """Map `systemctl show -p ...` output into a UnitState (missing fields become None)."""
    props = parse_show(text)
    main_pid = _int_or_none(props.get("MainPID"))
    return UnitState(
        unit=props.get("Id") or unit,
        active=props.get("ActiveState") or "unknown",
        sub=props.get("SubState", ""),
        result=props.get("Result") or None,
        load=props.get("LoadState") or None,
        main_pid=main_pid if main_pid else None,
        exec_main_status=_int_or_none(props.get("ExecMainStatus")),
        n_restarts=_int_or_none(props.get("NRestarts")),
        since=parse_timestamp(props.get("StateChangeTimestamp"))
        or parse_timestamp(props.get("ActiveEnterTimestamp"))
        or parse_timestamp(props.get("InactiveEnterTimestamp")),
    )


def parse_environment(value: str) -> dict[str, str]:
    """systemd's `Environment=` value (space-separated, quoted where needed) into a dict."""
    env: dict[str, str] = {}
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    for word in words:
        key, sep, val = word.partition("=")
        if sep and key:
            env[key] = val
    return env


def parse_env_file(text: str) -> dict[str, str]:
    """An EnvironmentFile's `KEY=value` lines (comments and blank lines skipped, quotes removed)."""
    env: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, val = line.partition("=")
        if not sep:
            continue
        try:
            parts = shlex.split(val, comments=False)
            val = " ".join(parts)
        except ValueError:
            val = val.strip()
        env[key.strip()] = val
    return env


def _message(value: object) -> str:
    # journalctl -o json prints non-UTF-8 or binary messages as a list of byte values, and fields
    # too large to show as null.
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(b, int) and 0 <= b < 256 for b in value):
            return bytes(value).decode("utf-8", "replace")
        # a field present several times: show them joined
        return "\n".join(_message(v) for v in value)
    if value is None:
        return ""
    return str(value)


def _first(value: object) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) else None


def journal_entry_from_json(line: str, unit: str) -> JournalEntry | None:
    """One `journalctl -o json` line into a JournalEntry; None for lines that are not entries."""
    try:
        fields = json.loads(line)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    cursor = fields.get("__CURSOR")
    if not isinstance(cursor, str):
        return None
    try:
        ts = int(str(fields.get("__REALTIME_TIMESTAMP"))) / 1e6
    except ValueError:
        ts = 0.0
    pid = _int_or_none(_first(fields.get("_PID")))
    comm = _first(fields.get("_COMM"))
    # systemd's own line about a unit names it in UNIT=, a field the unit's stdout can never carry
    # (journald sets _SYSTEMD_UNIT there): so an engine's text can never pass for systemd's.
    manager = pid == 1 or comm == "systemd" or _first(fields.get("SYSLOG_IDENTIFIER")) == "systemd"
    from_manager = manager and _first(fields.get("UNIT")) is not None
    if from_manager:
        entry_unit = _first(fields.get("UNIT")) or unit
    else:
        entry_unit = _first(fields.get("_SYSTEMD_UNIT")) or _first(fields.get("UNIT")) or unit
    return JournalEntry(
        cursor=cursor,
        ts=ts,
        unit=printable(entry_unit),  # the message stays exact (triage, JSON); everything shown escapes it
        message=_message(fields.get("MESSAGE")),
        pid=pid,
        priority=_int_or_none(_first(fields.get("PRIORITY"))),
        source="systemd" if from_manager else "unit",
    )
