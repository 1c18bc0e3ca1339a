"""An alert as the rules raise it and Alertmanager receives it: labels, annotations, start and end.

Labels name what the alert is about (`alertname`, `host`, `service`, `unit`, `layout`, `severity`) and make
its fingerprint, so the same incident always has the same identity: across re-sends, and across the
daemon's own restarts. Annotations say what happened (`summary`, `description`, `hint`, and the card's
`class`, `rank`, `figures`). Every text is redacted and made printable once, here, and cut to a bound:
no secret and no control character from a host reaches Alertmanager, a webhook or a terminal.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.domain.safe_text import shown

LABEL_KEYS = ("alertname", "host", "service", "unit", "layout", "severity")
#: Longest label value and annotation kept (Alertmanager takes more; receivers such as Slack take less).
MAX_LABEL_CHARS = 200
MAX_ANNOTATION_CHARS = 2000
#: Alertmanager's API writes a firing alert's end as the zero time.
ZERO_TIME = "0001-01-01T00:00:00Z"


def clean(text: str, limit: int = MAX_ANNOTATION_CHARS) -> str:
    """Host text as an alert carries it: secrets masked, controls escaped, cut to `limit`."""
    safe = shown(text)
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def rfc3339(ts: float) -> str:
    """POSIX seconds as Alertmanager's timestamps: `2026-05-26T00:06:20.123Z`."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(labels: tuple[tuple[str, str], ...]) -> str:
    """A stable identity of a label set (its sorted pairs hashed)."""
    digest = hashlib.sha256("\x00".join(f"{k}={v}" for k, v in sorted(labels)).encode()).hexdigest()
    return digest[:16]


@dataclass(frozen=True, slots=True)
class Scope:
    """What one rule judged in one evaluation: an alert name on one host (and service)."""

    alertname: str
    host: str
    service: str = ""


@dataclass(frozen=True, slots=True)
class Condition:
    """An alert's condition that holds now, or (`keep`) one the rule cannot judge yet and keeps as it is.

    Attributes:
        alertname: Which alert.
        host: The host it is about.
        service: The service ("" for a host's alerts).
        unit: The unit ("" when none).
        layout: The layout the unit runs ("" when unknown).
        summary: One line: what happened.
        description: More: where, since when, the figures.
        hint: What to do about it.
        since: When the condition began (a new incident's start); None: now.
        extra: More annotations (the card's `class`, `rank`, `figures`).
        keep: The rule has not seen enough to judge (the daemon just started): an active alert of this
            unit stays as it is, neither resolved nor changed.
    """

    alertname: str
    host: str
    service: str = ""
    unit: str = ""
    layout: str = ""
    summary: str = ""
    description: str = ""
    hint: str = ""
    since: float | None = None
    extra: tuple[tuple[str, str], ...] = ()
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """A rule's judgement of one scope: the conditions that hold; every other alert of the scope ended."""

    scope: Scope
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class Alert:
    """One incident: its labels, what it says, when it began and (once resolved) when it ended.

    Attributes:
        fingerprint: The identity of its labels.
        labels: (name, value) pairs, in LABEL_KEYS order, empty values left out.
        annotations: (name, value) pairs.
        starts_at: POSIX seconds; kept for the incident's whole life.
        ends_at: POSIX seconds once resolved; None while it fires.
        id: Its row in the state file, once stored.
    """

    fingerprint: str
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    starts_at: float
    ends_at: float | None = None
    id: int | None = field(default=None, compare=False)

    @property
    def firing(self) -> bool:
        return self.ends_at is None

    def label(self, name: str) -> str:
        """A label's value, "" when it has none."""
        return dict(self.labels).get(name, "")

    def annotation(self, name: str) -> str:
        return dict(self.annotations).get(name, "")

    def to_alertmanager(self, now: float, ttl_s: float) -> dict[str, Any]:
        """The alert as Alertmanager's API v2 takes it: a firing one ends `ttl_s` from now unless re-sent
        (as Prometheus does), so a daemon that stops leaves no alert firing for ever."""
        return {
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": rfc3339(self.starts_at),
            "endsAt": rfc3339(self.ends_at if self.ends_at is not None else now + ttl_s),
        }

    def to_json(self) -> dict[str, Any]:
        """The alert as `alerts --json` and the webhook show it."""
        return {
            "status": "firing" if self.firing else "resolved",
            "fingerprint": self.fingerprint,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": rfc3339(self.starts_at),
            "endsAt": ZERO_TIME if self.ends_at is None else rfc3339(self.ends_at),
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
        }


def alert_from(condition: Condition, severity: str, starts_at: float) -> Alert:
    """The alert a condition raises, its texts cleaned."""
    values = {
        "alertname": condition.alertname,
        "host": condition.host,
        "service": condition.service,
        "unit": condition.unit,
        "layout": condition.layout,
        "severity": severity,
    }
    labels = tuple((k, clean(values[k], MAX_LABEL_CHARS)) for k in LABEL_KEYS if values[k])
    notes = (("summary", condition.summary), ("description", condition.description), ("hint", condition.hint),
             *condition.extra)
    annotations = tuple((k, clean(v)) for k, v in notes if v)
    return Alert(fingerprint(labels), labels, annotations, starts_at)
