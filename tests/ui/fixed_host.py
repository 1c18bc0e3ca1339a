"""Hosts whose data comes from fixed snapshots, through the same Host protocols as real ones.

Snapshot tests build the real app on these, so the screen is the same on every run: states, GPU
samples, health and journals are recorded values (the journals were recorded from the simulated
engine), and the clock is frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

from pilot_wait import settle

from console.config import ConsoleConfig, HostConfig, UiConfig
from console.domain.values import GpuProcess, GpuSample, GpuSnapshot, HealthSample, JournalEntry, UnitState
from console.errors import HostError
from console.hosts.base import Host, LinkStatus, SampledGpuSource
from console.ui.screens.host import HostScreen

DATA = Path(__file__).parent / "data"
T0 = 1_780_000_000.0
"""The frozen 'now' of every fixed host."""
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
TOTAL_MIB = 97887


def frozen_clock() -> float:
    return T0


class FixedServices:
    """ServiceManager over fixed unit states and recorded journals; it refuses every change."""

    def __init__(self, host: str, states: dict[str, UnitState], journals: dict[str, list[JournalEntry]],
                 *, down: bool = False) -> None:
        self.host = host
        self.states = states
        self.journals = journals
        self.down = down

    async def state(self, unit: str) -> UnitState:
        if self.down:
            raise HostError(self.host, "connection refused (fixed: host down)")
        return self.states.get(unit, UnitState(unit, "inactive", "dead", result="success"))

    async def _refuse(self, *_args: object) -> None:
        raise HostError(self.host, "fixed data: no changes")

    start = stop = restart = reset_failed = _refuse
    write_file = _refuse

    async def daemon_reload(self) -> None:
        await self._refuse()

    async def journal(self, unit: str, *, after_cursor: str | None = None, follow: bool = True,
                      lines: int | None = None) -> AsyncIterator[JournalEntry]:
        if self.down:
            raise HostError(self.host, "connection refused (fixed: host down)")
        entries = self.journals.get(unit, [])
        if after_cursor is not None:
            entries = [e for e in entries if int(e.cursor) > int(after_cursor)]
        elif lines is not None:
            entries = entries[-lines:]
        for entry in entries:
            yield entry
        if follow:
            await asyncio.Event().wait()  # a quiet unit: the stream stays open


class FixedGpus(SampledGpuSource):
    def __init__(self, snapshot: GpuSnapshot | None, host: str) -> None:
        self.snapshot = snapshot
        self.host = host

    async def sample(self) -> GpuSnapshot:
        if self.snapshot is None:
            raise HostError(self.host, "nvidia-smi: connection refused (fixed: host down)")
        return self.snapshot


class FixedMetrics:
    """The engine's /metrics as one fixed reading (EP8 serving three requests), or a fixed reason."""

    def __init__(self, serving: bool) -> None:
        self.serving = serving

    async def scrape(self):
        from console.domain.metrics.engine_metrics import EngineScrape
        from console.hosts.endpoints.metrics import MetricsUnavailable

        if not self.serving:
            raise MetricsUnavailable("engine not reachable (connection refused)")
        return EngineScrape(taken_at=T0, engine="sglang", running_requests=3.0, waiting_requests=0.0,
                            kv_cache_usage=0.12, prompt_tokens_total=52_410.0, generation_tokens_total=911_204.0,
                            cache_hit_rate=0.41)


class FixedProbe:
    def __init__(self, sample: HealthSample) -> None:
        self.sample = sample
        self.metrics_reader = FixedMetrics(sample.status == "ready")

    async def probe(self) -> HealthSample:
        return self.sample


@contextlib.asynccontextmanager
async def _no_lock(name: str) -> AsyncIterator[None]:
    yield


def recorded_journal(unit: str, key: str, start_ts: float, first_cursor: int = 0) -> list[JournalEntry]:
    rows = json.loads((DATA / "journals.json").read_text())[key]
    return [
        JournalEntry(cursor=str(first_cursor + i), ts=start_ts + r["dt"], unit=unit, message=r["msg"],
                     priority=r["prio"], source=r["src"])
        for i, r in enumerate(rows)
    ]


def gpu_snapshot(used_mib: list[int], *, util: int = 0, taken_at: float = T0, pid: int = 4242) -> GpuSnapshot:
    gpus = tuple(GpuSample(index=i, uuid=f"GPU-{i:08x}", name=GPU_NAME, total_mib=TOTAL_MIB, used_mib=u,
                           util_pct=util if u > 2000 else 0, temp_c=40) for i, u in enumerate(used_mib))
    procs = tuple(GpuProcess(pid=pid + i, gpu_index=i, gpu_uuid=f"GPU-{i:08x}", used_mib=u - 600, name="python")
                  for i, u in enumerate(used_mib) if u > 2000)
    return GpuSnapshot(taken_at=taken_at, gpus=gpus, processes=procs)


def loading_series(final: list[int], steps: int = 24) -> list[GpuSnapshot]:
    """Snapshots of a load ramping up to `final`, one every 5 s, ending at T0 (for sparklines)."""
    out = []
    for k in range(steps):
        frac = min(1.0, (k + 1) / (steps * 0.7))
        out.append(gpu_snapshot([int(600 + (u - 600) * frac) for u in final], util=38,
                                taken_at=T0 - 5 * (steps - 1 - k)))
    return out


EP8_USED = [78449, 78522, 78564, 78464, 78588, 78556, 78553, 78566]


def demo_like_host(cfg: HostConfig, *, scenario: str) -> Host:
    """`ep8`: EP8 running and ready; `failed`: TP4 EP2 died of OOM, nothing runs; `down`: unreachable."""
    service = cfg.services[0]
    ep8 = service.unit_for(service.layout("EP8"))
    tp4 = service.unit_for(service.layout("TP4 EP2"))
    journals = {
        ep8: recorded_journal(ep8, "ep8", T0 - 125.0),
        # TP4 EP2 died before EP8 came up in `failed`; with EP8 running, its journal is the switch
        # the card's replay starts now (the pane orders lines by journal time).
        tp4: recorded_journal(tp4, "tp4ep2", T0 - 300.0 if scenario == "failed" else T0 + 1.0, first_cursor=10_000),
    }
    states: dict[str, UnitState] = {}
    link = LinkStatus(state="up", since=T0 - 3600, last_ok_at=T0)
    if scenario == "ep8":
        states[ep8] = UnitState(ep8, "active", "running", result="success", main_pid=4242, n_restarts=0,
                                since=T0 - 125.0)
        snapshot = gpu_snapshot(EP8_USED, util=38)
        health = HealthSample(T0, "ready", http_status=200, latency_s=0.004)
    elif scenario == "failed":
        states[tp4] = UnitState(tp4, "failed", "failed", result="exit-code", exec_main_status=1, n_restarts=0,
                                since=T0 - 290.0)
        snapshot = gpu_snapshot([600] * 8)
        health = HealthSample(T0, "down", error="connection refused")
    else:
        link = LinkStatus(state="down", since=T0 - 75, last_ok_at=T0 - 75, error="ssh: connection refused")
        snapshot = None
        health = HealthSample(T0, "down", error="connection refused")
    return Host(
        config=cfg,
        services=FixedServices(cfg.name, states, journals, down=scenario == "down"),
        gpus=FixedGpus(snapshot, cfg.name),
        probes={service.name: FixedProbe(health)},
        lock=_no_lock,
        link=link,
    )


def fixed_config(names: list[str], *, theme: str = "dark", readonly: bool = False,
                 keys: tuple[tuple[str, str], ...] = ()) -> ConsoleConfig:
    """The demo cluster's host config under other names, with polls that run once (refresh 1 h)."""
    from console.config import demo_config_path, load_config

    demo = load_config(demo_config_path())
    base = demo.hosts[0]
    hosts = tuple(dataclasses.replace(base, name=n) for n in names)
    ui = UiConfig(theme=theme, line_cap=5000, history_s=600, refresh_s=3600.0, readonly=readonly, keys=keys)
    return dataclasses.replace(demo, hosts=hosts, ui=ui)


def fixed_app(scenarios: dict[str, str], **kwargs: object):
    """The real ConsoleApp on fixed hosts: {"demo": "ep8", "gpu-node-2": "failed", ...}."""
    from console.ui.app import ConsoleApp

    kwargs.setdefault("clock", frozen_clock)
    theme = str(kwargs.pop("theme", "dark"))
    readonly = bool(kwargs.pop("readonly", False))
    keys = kwargs.pop("keys", ())
    config = fixed_config(list(scenarios), theme=theme, readonly=readonly, keys=keys)  # type: ignore[arg-type]
    hosts = [demo_like_host(cfg, scenario=scenarios[cfg.name]) for cfg in config.hosts]
    return ConsoleApp(hosts, config=config, **kwargs)  # type: ignore[arg-type]


async def gpu_pane_with_data(pilot):
    """The host screen's GPU pane once its first sample is in."""
    from console.ui.widgets.gpu_pane import GpuPane

    app = pilot.app
    assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.query(GpuPane))
    pane = app.screen.query_one(GpuPane)
    assert await settle(pilot, lambda: pane.snapshot is not None)
    return pane
