"""The rules of one host: unreachable (or its data stale), and a GPU that reported an Xid."""

from __future__ import annotations

from collections.abc import Sequence

from console.domain.alerts.alert import Condition, Scope, Verdict
from console.domain.alerts.service_rules import Active
from console.domain.alerts.thresholds import GPU_XID, HOST_UNREACHABLE, AlertThresholds
from console.domain.values import Finding

#: How long an Xid read in a unit's journal (the kernel's `NVRM: Xid` quoted there) keeps its alert up;
#: dcgm-exporter's gauge instead holds the last Xid until the GPU is reset.
JOURNAL_XID_HOLD_S = 3600.0


class HostWatch:
    """What the daemon knows of one host's reachability and GPUs.

    Args:
        host: The host's name.
        thresholds: The rules' numbers.
        watching_since: When the daemon began watching (the age of a host never read counts from here).
    """

    def __init__(self, host: str, thresholds: AlertThresholds, watching_since: float) -> None:
        self.host = host
        self.t = thresholds
        self.watching_since = watching_since
        self.last_ok: float | None = None
        self.read_once = False
        self.error: str | None = None
        self.source = "ssh"
        self.blind: str | None = None
        """Why the source of this host's age (Prometheus) could not be read: its age is unknown, not growing."""
        self.gpu_findings: tuple[Finding, ...] | None = None
        """The GPUs' Xid findings at the last reading; None while no reading has succeeded."""
        self._journal_xids: dict[str, Finding] = {}

    def reached(self, ts: float) -> None:
        """The host's state was read."""
        self.last_ok, self.read_once, self.error = ts, True, None

    def missed(self, error: str) -> None:
        """A reading failed (the host is down, its SSH connection dropped, a command timed out)."""
        self.error = error

    def data_seen(self, age_s: float | None, now: float, error: str | None = None, source: str = "prometheus") -> None:
        """Prometheus' view of the host: the age of its newest sample (None: never seen)."""
        self.source, self.blind = source, None
        if age_s is not None:
            self.last_ok, self.read_once = now - age_s, True
        self.error = error

    def source_failed(self, error: str) -> None:
        """The source of every host's age could not be read: judge nobody unreachable for it."""
        self.blind = error

    def observe_gpus(self, findings: Sequence[Finding]) -> None:
        self.gpu_findings = tuple(findings)

    def journal_xid(self, finding: Finding) -> None:
        self._journal_xids[finding.summary] = finding

    def verdicts(self, now: float, active: Active) -> list[Verdict]:
        return [self._unreachable(now, active), self._xid(now, active)]

    def _unreachable(self, now: float, active: Active) -> Verdict:
        scope = Scope(HOST_UNREACHABLE, self.host)
        if self.blind is not None:
            keep = (HOST_UNREACHABLE, "") in active
            return Verdict(scope, (Condition(HOST_UNREACHABLE, self.host, keep=True),) if keep else ())
        since = self.last_ok if self.last_ok is not None else self.watching_since
        if now - since >= self.t.unreachable_s:
            what = "read" if self.source == "ssh" else f"seen in {self.source}"
            return Verdict(scope, (Condition(
                HOST_UNREACHABLE, self.host,
                summary=f"{self.host}: not {what} for more than {self.t.unreachable_s:g} s"
                        + (f" ({self.error})" if self.error else ""),
                description=("never read since the watch began" if self.last_ok is None
                             else f"last read {now - self.last_ok:.0f} s ago") + f" (through {self.source})",
                hint="check the host is up, its SSH (or exporters) answer, and the network between",
                since=since),))
        if (HOST_UNREACHABLE, "") in active and not self.read_once:
            return Verdict(scope, (Condition(HOST_UNREACHABLE, self.host, keep=True),))
        return Verdict(scope)

    def _xid(self, now: float, active: Active) -> Verdict:
        scope = Scope(GPU_XID, self.host)
        self._journal_xids = {k: f for k, f in self._journal_xids.items()
                              if f.ts is None or now - f.ts < JOURNAL_XID_HOLD_S}
        findings = [*(self.gpu_findings or ()), *self._journal_xids.values()]
        if findings:
            return Verdict(scope, (Condition(
                GPU_XID, self.host, summary="; ".join(f.summary for f in findings),
                description=f"{self.host}: " + "; ".join(f.line for f in findings),
                hint=findings[0].hint or "check nvidia-smi -q and the kernel log; reset or drain the GPU",
                since=min((f.ts for f in findings if f.ts is not None), default=None)),))
        if (GPU_XID, "") in active and self.gpu_findings is None:
            return Verdict(scope, (Condition(GPU_XID, self.host, keep=True),))
        return Verdict(scope)
