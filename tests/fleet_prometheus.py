"""A real Prometheus (Debian's `prometheus` package) holding a synthetic fleet, for tests and bench/fleet.py.

The series are backfilled, not scraped: `SyntheticFleet` writes what dcgm-exporter and the engines
would have published (15 s apart, over `span_s` up to `end`), `promtool tsdb create-blocks-from
openmetrics` turns that into TSDB blocks in a fresh data directory, and `prometheus` is started on that
directory with no scrape jobs, on a free loopback port. Backfilling suits hundreds of hosts (no
hundreds of exporters to run) and makes every figure known in advance. The blocks are the only data:
the head is empty and nothing is appended, so they never overlap it.

Timing, which the assertions rely on: an instant query at time T sees a series' newest sample at or
before T if it is within the 5 min look-back; without scrapes there are no staleness markers, so a
host whose samples end before T - 5 min is absent (the row's age then comes from the `seen` subquery),
and one whose samples end 1-5 min before T is present but old (stale by `stale_after_s`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ports import free_port
from waiting import WaitTimeout, wait_for

GPU_TOTAL_MIB = 81559  # an H100 80 GB as nvidia-smi and dcgm report it
INTERVAL_S = 15


def missing_reason() -> str | None:
    """Why the real-Prometheus tests cannot run here, or None when they can."""
    missing = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian: apt-get install prometheus)"
    return None


@dataclass
class SyntheticFleet:
    """N hosts with 8 GPUs, dcgm-exporter on :9400 and one engine each (even: SGLang, odd: vLLM).

    Special hosts (by index): `stale` stops reporting `stale_age_s` before `end`; `lagging` stops
    120 s before `end`; `down` has its engine target failing (up 0, no engine series) for the last
    10 min; `reset` restarts its engine 30 s before `end` (its token counter drops to 0); `ranks` (SGLang)
    runs 2 data-parallel replicas of 2 TP ranks each, every rank exporting its replica's figures.
    """

    hosts: int
    end: float
    span_s: int = 900
    gpus: int = 8
    stale: int = 1
    lagging: int = 2
    down: int = 3
    reset: int = 4
    ranks: int = 6
    stale_age_s: int = 480
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.end = float(int(self.end))
        self.names = [f"gpu-{i:04d}" for i in range(self.hosts)]

    def engine(self, i: int) -> str:
        return "sglang" if i % 2 == 0 else "vllm"

    def used_mib(self, i: int, gpu: int) -> int:
        return 300 if gpu == self.gpus - 1 and i % 3 == 0 else 60_000 + (i * 7 + gpu * 13) % 15_000

    def running(self, i: int) -> int:
        return i % 17

    def waiting(self, i: int) -> int:
        return i % 5

    def kv(self, i: int) -> float:
        return (i % 100) / 100

    def tokens_per_s(self, i: int) -> float:
        return 100.0 + i

    def last_sample(self, i: int) -> float:
        """When host i's GPU series end."""
        if i == self.stale:
            return self.end - self.stale_age_s
        if i == self.lagging:
            return self.end - 120
        return self.end

    def _times(self, until: float) -> Iterator[float]:
        t = self.end - self.span_s
        while t <= until:
            yield t
            t += INTERVAL_S

    def lines(self) -> Iterator[str]:
        """The OpenMetrics text, series by series, each in time order, ending with `# EOF`."""
        for i, name in enumerate(self.names):
            dcgm = f'instance="{name}:9400",job="dcgm"'
            last = self.last_sample(i)
            for gpu in range(self.gpus):
                labels = f'gpu="{gpu}",UUID="GPU-{i:04d}-{gpu}",modelName="NVIDIA H100 80GB HBM3",{dcgm}'
                used = self.used_mib(i, gpu)
                for metric, value in (("DCGM_FI_DEV_FB_USED", used), ("DCGM_FI_DEV_FB_FREE", GPU_TOTAL_MIB - used),
                                      ("DCGM_FI_DEV_GPU_UTIL", 90 if used > 1024 else 0)):
                    yield from (f"{metric}{{{labels}}} {value} {t:.3f}" for t in self._times(last))
            yield from (f"up{{{dcgm}}} 1 {t:.3f}" for t in self._times(last))
            yield from self._engine_lines(i, name, last)
        yield "# EOF"

    def _engine_lines(self, i: int, name: str, last: float) -> Iterator[str]:
        engine = self.engine(i)
        port = 30000 if engine == "sglang" else 8000
        base = f'instance="{name}:{port}",job="{engine}",model_name="Qwen3-235B-A22B-FP8"'
        ranks = [f'{base},dp_rank="{d}",tp_rank="{t}"' for d in (0, 1) for t in (0, 1)] if i == self.ranks else [base]
        engine_last = self.end - 600 if i == self.down else last
        names = {
            "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                       "sglang:generation_tokens_total"),
            "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                     "vllm:generation_tokens_total"),
        }[engine]
        for labels in ranks:
            for metric, value in zip(names[:3], (self.running(i), self.waiting(i), self.kv(i)), strict=True):
                yield from (f"{metric}{{{labels}}} {value} {t:.3f}" for t in self._times(engine_last))
            start = self.end - self.span_s
            restart = self.end - 30 if i == self.reset else None
            for t in self._times(engine_last):
                since = t - restart if restart is not None and t >= restart else t - start
                yield f"{names[3]}{{{labels}}} {self.tokens_per_s(i) * since:.1f} {t:.3f}"
        for t in self._times(last):
            yield f"up{{{base}}} {0 if i == self.down and t > engine_last else 1} {t:.3f}"


def backfill(fleet: SyntheticFleet, data_dir: Path) -> float:
    """Write the fleet as OpenMetrics and turn it into TSDB blocks in `data_dir`; returns seconds taken."""
    started = time.perf_counter()
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir.parent / "fleet.om"
    with source.open("w") as out:
        for line in fleet.lines():
            out.write(line + "\n")
    proc = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
                          capture_output=True, text=True, timeout=600)
    source.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"promtool failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return time.perf_counter() - started


@dataclass(frozen=True)
class RunningPrometheus:
    url: str
    pid: int


@contextlib.contextmanager
def prometheus_server(data_dir: Path, *, timeout_s: float = 60.0) -> Iterator[RunningPrometheus]:
    """Run `prometheus` on `data_dir` on a free loopback port (not the system service)."""
    config = data_dir.parent / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    log = (data_dir.parent / "prometheus.log").open("w")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2")},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {proc.returncode}: {_tail(data_dir.parent / 'prometheus.log')}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url + "/-/ready", timeout=1) as resp:
                    return resp.status == 200
            return False

        try:
            wait_for(ready, "prometheus's /-/ready", timeout_s=timeout_s, interval_s=0.1)
        except WaitTimeout as exc:
            raise RuntimeError(f"{exc}: {_tail(data_dir.parent / 'prometheus.log')}") from None
        yield RunningPrometheus(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(path.read_text().strip().splitlines()[-5:])
    return "(no log)"


@pytest.fixture(scope="session", name="fleet_prometheus")
def fleet_prometheus_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SyntheticFleet, str]]:
    """(a 12-host synthetic fleet ending 2 s before the session started, the URL of a Prometheus holding it).

    Skips with the reason where the binaries are missing; fails instead under SERVE_CONSOLE_REQUIRE_TESTBED=1.
    """
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("SERVE_CONSOLE_REQUIRE_TESTBED") == "1":
            pytest.fail(f"a real Prometheus is required (SERVE_CONSOLE_REQUIRE_TESTBED=1): {reason}")
        pytest.skip(reason)
    fleet = SyntheticFleet(hosts=12, end=time.time() - 2)
    data = tmp_path_factory.mktemp("prometheus") / "data"
    backfill(fleet, data)
    with prometheus_server(data) as server:
        yield fleet, server.url

