"""The fleet overview's rows: one per host, from Prometheus (one query per refresh) or over SSH.

Through Prometheus no SSH connection is opened: rows come from what dcgm-exporter and the engines
already publish. A host whose series stopped, or never came, shows as stale with its age; its
figures are None (not exported), never zero. SSH stays for the host the operator opens or acts on.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.config import FleetConfig, HostConfig
from console.hosts.endpoints import PrometheusClient, VectorSample
from console.ops.fleet.query import FIELD_LABEL, HostFigures, fleet_queries
from console.ops.views import HostSummary

_PORT = re.compile(r":\d+$")


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One host in the fleet overview."""

    host: str
    source: str
    """"prometheus" or "ssh"."""
    up: bool | None
    """Every scrape target (or the SSH link) of the host answers; None when unknown."""
    age_s: float | None
    """Age of the oldest figure group shown (GPUs, engines); None when the host was never seen."""
    stale: bool
    gpus_used_mib: int | None = None
    gpus_total_mib: int | None = None
    gpus_busy: int | None = None
    gpu_count: int | None = None
    running_requests: int | None = None
    waiting_requests: int | None = None
    kv_cache_usage: float | None = None
    """0..1, the fullest engine's."""
    generation_tokens_per_s: float | None = None
    gpus_age_s: float | None = None
    engine_age_s: float | None = None
    targets: int | None = None
    targets_up: int | None = None
    configured: bool = True
    """The host is in hosts.toml (so it can be opened and acted on)."""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `fleet --json` line: the keys of the issue first, then the details."""
        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "host": self.host, "source": self.source, "up": self.up, "age_s": rounded(self.age_s, 1),
            "gpus_used_mib": self.gpus_used_mib, "gpus_total_mib": self.gpus_total_mib,
            "gpus_busy": self.gpus_busy, "running_requests": self.running_requests,
            "kv_cache_usage": rounded(self.kv_cache_usage, 4),
            "generation_tokens_per_s": rounded(self.generation_tokens_per_s, 2),
            "stale": self.stale, "gpu_count": self.gpu_count, "waiting_requests": self.waiting_requests,
            "gpus_age_s": rounded(self.gpus_age_s, 1), "engine_age_s": rounded(self.engine_age_s, 1),
            "targets": self.targets, "targets_up": self.targets_up, "configured": self.configured,
            "error": self.error,
        }  # fmt: skip


class HostMapper:
    """Label value -> host name: the configured regex, then the port strip, then hosts.toml's names
    and addresses (so `10.0.0.7:9400` finds the host whose address is 10.0.0.7)."""

    def __init__(self, cfg: FleetConfig, hosts: Sequence[HostConfig] = ()) -> None:
        self.regex = re.compile(cfg.host_regex) if cfg.host_regex else None
        self.strip_port = cfg.strip_port
        self.known: dict[str, str] = {}
        for host in hosts:
            self.known.setdefault(host.name.lower(), host.name)
        for host in hosts:
            if host.address:
                self.known.setdefault(host.address.lower(), host.name)

    def host(self, label_value: str) -> str | None:
        """The host a label value names, or None when the regex does not match it."""
        value = label_value
        if self.regex is not None:
            match = self.regex.search(value)
            if match is None:
                return None
            value = match.group("host") if "host" in self.regex.groupindex else match.group(1)
        if self.strip_port:
            value = _PORT.sub("", value)
            if value.startswith("[") and value.endswith("]"):  # [::1]:9400
                value = value[1:-1]
        if not value:
            return None
        return self.known.get(value.lower(), value)


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def _age(now: float, fresh: float | None, seen: float | None) -> float | None:
    newest = fresh if fresh is not None else seen
    return None if newest is None else max(0.0, now - newest)


def prometheus_row(host: str, figures: HostFigures | None, now: float, cfg: FleetConfig, *,
                   configured: bool) -> FleetRow:
    """One host's row from its merged figures (None: Prometheus has no series for it)."""
    if figures is None:
        return FleetRow(host=host, source="prometheus", up=None, age_s=None, stale=True, configured=configured,
                        error=f"no series with a {cfg.host_label} label for this host in Prometheus")
    f = figures.fields
    gpus_age = _age(now, f.get("gpus_ts"), f.get("gpus_seen"))
    engine_age = _age(now, f.get("engine_ts"), f.get("engine_seen"))
    ages = [a for a in (gpus_age, engine_age) if a is not None]
    age = max(ages) if ages else None
    up = None if "up" not in f else f["up"] >= 1.0
    gpus_fresh = "gpus_ts" in f  # Prometheus still returns the series (within its 5 min look-back)
    engine_fresh = "engine_ts" in f
    # Series seen lately but gone now (a staleness marker, a target dropped): missing, so stale.
    gone = ("gpus_seen" in f and not gpus_fresh) or ("engine_seen" in f and not engine_fresh)
    return FleetRow(
        host=host, source="prometheus", up=up, age_s=age,
        stale=age is None or age > cfg.stale_after_s or up is False or gone,
        gpus_used_mib=_int(f.get("gpus_used_mib")) if gpus_fresh else None,
        gpus_total_mib=_int(f.get("gpus_total_mib")) if gpus_fresh else None,
        gpus_busy=_int(f.get("gpus_busy")) if gpus_fresh else None,
        gpu_count=_int(f.get("gpu_count")) if gpus_fresh else None,
        running_requests=_int(f.get("running_requests")) if engine_fresh else None,
        waiting_requests=_int(f.get("waiting_requests")) if engine_fresh else None,
        kv_cache_usage=f.get("kv_cache_usage") if engine_fresh else None,
        generation_tokens_per_s=f.get("generation_tokens_per_s") if engine_fresh else None,
        gpus_age_s=gpus_age, engine_age_s=engine_age,
        targets=_int(f.get("targets")), targets_up=_int(f.get("targets_up")), configured=configured,
    )  # fmt: skip


#: The last-seen query runs at most this often; in between, its (absolute) timestamps are reused,
#: unless a host's series vanished since the last refresh, which asks for them at once.
SEEN_EVERY_S = 60.0
_FRESH_OF = {"gpus_seen": "gpus_ts", "engine_seen": "engine_ts"}


class PrometheusFleet:
    """Reads the whole fleet's rows from Prometheus: two or three concurrent HTTP calls per refresh."""

    def __init__(self, cfg: FleetConfig, hosts: Sequence[HostConfig] = (), *,
                 client: PrometheusClient | None = None) -> None:
        self.cfg = cfg
        self.hosts = [h.name for h in hosts]
        self.mapper = HostMapper(cfg, hosts)
        self.client = client or PrometheusClient(cfg.prometheus, timeout_s=cfg.timeout_s)
        *self.fresh_queries, self.seen_query = fleet_queries(cfg)
        self.seen_queries = 0
        """How many times the last-seen query ran (for tests and the benchmark)."""
        self._seen: dict[str, dict[str, float]] = {}
        self._seen_at: float | None = None
        self._fresh_before: set[tuple[str, str]] = set()

    def _figures(self, samples: list[VectorSample], into: dict[str, HostFigures]) -> None:
        for sample in samples:
            label_value = sample.labels.get(self.cfg.host_label)
            field = sample.labels.get(FIELD_LABEL)
            if label_value is None or field is None:
                continue
            host = self.mapper.host(label_value)
            if host is not None:
                into.setdefault(host, HostFigures(set(), {})).add(label_value, field, sample.value)

    async def rows(self, *, at: float | None = None) -> list[FleetRow]:
        """Every configured host (in file order), then every other host Prometheus knows (by name).

        Args:
            at: Evaluate at this time (POSIX seconds) instead of the server's now; always asks last-seen.

        Raises:
            HostError: Prometheus could not be read.
        """
        ask_seen = at is not None or self._seen_at is None or time.monotonic() - self._seen_at > SEEN_EVERY_S
        queries = [*self.fresh_queries, *([self.seen_query] if ask_seen else [])]
        answers = list(await asyncio.gather(*(self.client.query(q, at=at) for q in queries)))
        figures: dict[str, HostFigures] = {}
        self._figures([s for answer in answers for s in answer], figures)
        fresh = {(h, f) for h, fig in figures.items() for f in _FRESH_OF.values() if f in fig.fields}
        if not ask_seen and self._fresh_before - fresh:  # a host stopped reporting: when was it last seen?
            ask_seen = True
            answers.append(await self.client.query(self.seen_query, at=at))
            self._figures(answers[-1], figures)
        # Ages by the server's clock, which also stamped the samples (the console's may be skewed).
        now = max((s.evaluated_at for answer in answers for s in answer),
                  default=at if at is not None else time.time())
        if ask_seen:
            self.seen_queries += 1
            self._seen_at = time.monotonic()
            self._seen = {h: {f: v for f, v in fig.fields.items() if f in _FRESH_OF} for h, fig in figures.items()}
        else:
            for host, seen in self._seen.items():
                fields = figures.setdefault(host, HostFigures(set(), {})).fields
                for field, ts in seen.items():
                    if ts <= now:
                        fields.setdefault(field, ts)
        self._fresh_before = fresh
        configured = set(self.hosts)
        others = sorted(h for h in figures if h not in configured)
        return [prometheus_row(h, figures.get(h), now, self.cfg, configured=h in configured)
                for h in [*self.hosts, *others]]

    async def close(self) -> None:
        await self.client.close()


def engines_text(row: FleetRow) -> str:
    """`12 run · 3 wait · KV 81% · 1,930 tok/s`; "-" for what is not exported, "-" when nothing is."""
    if all(v is None for v in (row.running_requests, row.waiting_requests, row.kv_cache_usage,
                               row.generation_tokens_per_s)):
        return "-"

    def or_dash(value: object, text: str) -> str:
        return "-" if value is None else text

    return " · ".join((
        f"{or_dash(row.running_requests, str(row.running_requests))} run",
        f"{or_dash(row.waiting_requests, str(row.waiting_requests))} wait",
        f"KV {or_dash(row.kv_cache_usage, f'{row.kv_cache_usage or 0:.0%}')}",
        f"{or_dash(row.generation_tokens_per_s, f'{row.generation_tokens_per_s or 0:,.0f}')} tok/s",
    ))


def fleet_summary(row: FleetRow, now: float) -> HostSummary:
    """A fleet-screen row from a Prometheus row; `now` is the console's clock, so the screen's age is
    the row's own. A host with no figures at all is unreachable, with the age it was last seen."""
    has_data = row.gpus_used_mib is not None or row.running_requests is not None
    if not has_data:
        why = row.error or ("not seen in Prometheus" if row.age_s is None else "no fresh series in Prometheus")
        return HostSummary(row.host, now, reachable=False, error=why, source="prometheus", stale=True,
                           last_ok_at=None if row.age_s is None else now - row.age_s)
    targets = f"{row.targets_up}/{row.targets} targets up" if row.targets else "-"
    return HostSummary(
        host=row.host, taken_at=now - (row.age_s or 0.0), reachable=True, error=row.error,
        gpu_used_mib=row.gpus_used_mib, gpu_total_mib=row.gpus_total_mib, gpus_busy=row.gpus_busy,
        gpu_count=row.gpu_count, health=targets, failed=row.up is False, source="prometheus",
        stale=row.stale, engines=engines_text(row),
    )  # fmt: skip
