"""The alerts that fire now, and what changes when the rules judge again: fired, updated, resolved.

An incident is identified by its labels' fingerprint. While its condition holds it keeps its first
`starts_at`, however often the rules judge it, and however often the daemon restarts (it reloads the
firing alerts from the state file into `restore`). A scope the rules did not judge this time (a host
that could not be read) keeps its alerts as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from console.domain.alerts.alert import Alert, Condition, Scope, Verdict, alert_from
from console.domain.alerts.service_rules import Active
from console.domain.alerts.thresholds import AlertThresholds

FIRING, UPDATED, RESOLVED = "firing", "updated", "resolved"


@dataclass(frozen=True, slots=True)
class Transition:
    """What happened to one alert: it fired, its text changed, or it resolved."""

    kind: str
    alert: Alert


def _in_scope(alert: Alert, scope: Scope) -> bool:
    return (alert.label("alertname"), alert.label("host"), alert.label("service")) == (
        scope.alertname, scope.host, scope.service)


class AlertBook:
    """The firing alerts, keyed by fingerprint.

    Args:
        thresholds: For the severity of each alert name.
    """

    def __init__(self, thresholds: AlertThresholds) -> None:
        self.thresholds = thresholds
        self.firing: dict[str, Alert] = {}
        self.extra: dict[str, tuple[tuple[str, str], ...]] = {}
        """Annotations an incident gains after it fired (its evidence folder), by fingerprint, kept over
        every later judgement until it resolves."""

    def restore(self, alerts: Iterable[Alert]) -> None:
        """Alerts that were firing when the daemon stopped: the same incidents go on."""
        for alert in alerts:
            if alert.firing:
                self.firing[alert.fingerprint] = alert
                if alert.annotation("evidence"):
                    self.extra[alert.fingerprint] = (("evidence", alert.annotation("evidence")),)

    def annotate(self, fp: str, notes: tuple[tuple[str, str], ...]) -> None:
        """Add annotations to a firing incident from the next judgement on (`apply` then updates it)."""
        if fp in self.firing:
            self.extra[fp] = notes

    def active_for(self, host: str, service: str = "") -> Active:
        """(alert name, unit) of what fires on this host (and service), for the rules' judgement."""
        return frozenset((a.label("alertname"), a.label("unit")) for a in self.firing.values()
                         if a.label("host") == host and a.label("service") == service)

    def apply(self, verdicts: Iterable[Verdict], now: float) -> list[Transition]:
        """Judge again: new conditions fire, changed ones update, ended ones resolve."""
        out: list[Transition] = []
        for verdict in verdicts:
            matched: set[str] = set()
            for condition in verdict.conditions:
                if condition.keep:
                    matched |= self._kept(verdict.scope, condition)
                    continue
                alert = alert_from(condition, self.thresholds.severity(condition.alertname),
                                   condition.since if condition.since is not None else now)
                if alert.fingerprint in self.extra:
                    alert = replace(alert, annotations=alert.annotations + self.extra[alert.fingerprint])
                matched.add(alert.fingerprint)
                old = self.firing.get(alert.fingerprint)
                if old is None:
                    alert = replace(alert, starts_at=min(alert.starts_at, now))
                    self.firing[alert.fingerprint] = alert
                    out.append(Transition(FIRING, alert))
                elif old.annotations != alert.annotations:
                    updated = replace(old, annotations=alert.annotations)
                    self.firing[alert.fingerprint] = updated
                    out.append(Transition(UPDATED, updated))
            for fp, alert in list(self.firing.items()):
                if fp not in matched and _in_scope(alert, verdict.scope):
                    del self.firing[fp]
                    self.extra.pop(fp, None)
                    out.append(Transition(RESOLVED, replace(alert, ends_at=max(now, alert.starts_at))))
        return out

    def _kept(self, scope: Scope, condition: Condition) -> set[str]:
        return {fp for fp, a in self.firing.items()
                if _in_scope(a, scope) and a.label("unit") == condition.unit}

    def stored(self, alert: Alert) -> None:
        """The alert got its row in the state file: remember the id with it."""
        if alert.fingerprint in self.firing and alert.firing:
            self.firing[alert.fingerprint] = alert
