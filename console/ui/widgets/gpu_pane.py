"""GPU memory pane: a row per GPU with a bar coloured by what is unusual for the layout, MiB, utilisation
and a sparkline."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.widget import Widget

from console.domain.fit import BAD, IDLE, OK, WARN, GpuVerdict, judge_gpus
from console.domain.safe_text import shown
from console.domain.triage import xid_findings
from console.domain.values import GpuProcess, GpuSnapshot
from console.hosts.base import Host
from console.hosts.gpus import GpuHistory
from console.ui.widgets.polling import poll_forever
from console.ui.worker_errors import NotifiesWorkerErrors

SPARK = "▁▂▃▄▅▆▇█"
FAST_POLL_S = 0.25
#: The fewest columns the `p` view gives a GPU's processes (`pid 4242 python 77849 MiB`), in the place of
#: the MiB column and the sparkline.
PROCESS_CELL_COLUMNS = 26
#: gpu_health's levels -> component classes (an idle GPU of the layout is drawn like an ok one).
LEVEL_STYLE = {OK: "gpu--ok", WARN: "gpu--warn", BAD: "gpu--crit", IDLE: "gpu--ok"}


def _spark_char(fraction: float) -> str:
    """One block for a fraction 0..1; a NaN or infinite value (a host's answer) is a gap."""
    if not math.isfinite(fraction):
        return " "
    return SPARK[min(len(SPARK) - 1, max(0, int(fraction * (len(SPARK) - 1) + 0.5)))]


def sparkline(values: list[float], width: int) -> str:
    """Fractions 0..1 as block characters, newest at the right, padded to `width`."""
    return "".join(_spark_char(v) for v in values[-width:]).rjust(width)


def spark_fractions(points: list[tuple[float, int]], total_mib: int, width: int, now: float) -> list[float]:
    """Memory over the whole kept history (up to `history_s`), as `width` time buckets (max per bucket).

    The buckets span from the oldest kept sample to now, so the line covers the last minutes, not
    the last `width` samples; a bucket without samples repeats the one before it.
    """
    if not points or total_mib <= 0:
        return []
    start = points[0][0]
    span = max(now - start, 1e-9)
    buckets: list[int | None] = [None] * width
    for ts, mib in points:
        i = min(width - 1, max(0, int((ts - start) / span * width)))
        buckets[i] = mib if buckets[i] is None else max(buckets[i], mib)  # type: ignore[type-var]
    out: list[float] = []
    last: int | None = None
    for value in buckets:
        last = value if value is not None else last
        out.append(0.0 if last is None else last / total_mib)
    return out


def processes_cell(procs: list[GpuProcess], width: int) -> str:
    """A GPU's processes in the sparkline's place: `pid 4242 python 77849 MiB`, more as `+2`."""
    if not procs:
        return "no process".ljust(width)[:width]
    first = procs[0]
    # A process name is host text: made inert like every other.
    text = f"pid {first.pid} {shown(first.name or '?')} {first.used_mib or 0} MiB"
    if len(procs) > 1:
        text += f" +{len(procs) - 1}"
    return text.ljust(width)[:width]


def bar(fraction: float, width: int) -> tuple[str, str]:
    """A filled and an empty part of a bar; a NaN or infinite fraction fills nothing."""
    filled = min(width, max(0, round(fraction * width))) if math.isfinite(fraction) else 0
    return "█" * filled, "░" * (width - filled)


class GpuPane(NotifiesWorkerErrors, Widget, can_focus=False):
    """Polls its host's GPU source in its own exclusive worker and renders the latest snapshot."""

    COMPONENT_CLASSES = {"gpu--ok", "gpu--warn", "gpu--crit", "gpu--dim", "gpu--empty", "gpu--label",
                         "gpu--stale", "gpu--proc"}

    def __init__(self, host: Host, *, refresh_s: float = 1.0, history_s: float = 600.0,
                 clock: Callable[[], float], id: str | None = None) -> None:
        super().__init__(id=id)
        self.host = host
        self.refresh_s = refresh_s
        self.clock = clock
        self.snapshot: GpuSnapshot | None = None
        points = int(history_s / max(min(refresh_s, FAST_POLL_S), 0.1))
        self.history = GpuHistory(history_s=history_s, max_points=max(10, points))
        self.gpus_in_use: int | None = None
        self.nodes = 1
        """How many hosts the layout runs on, `gpus_in_use` on each."""
        """How many GPUs (from index 0) the running layout uses; the rest are dimmed."""
        self.expected_mib: int | None = None
        """What each of the layout's GPUs is expected to hold (gpu_health.expected_used_mib)."""
        self.show_processes = False
        self.fast = False
        """Sample 4x a second while a switch runs, so the bars move as the weights load."""
        self.error: str | None = None
        self.border_title = "GPU memory"

    def on_mount(self) -> None:
        self.poll()

    @work(exclusive=True, group="gpu-poll", exit_on_error=False)
    async def poll(self) -> None:
        """Sample, render, sleep; one poll at a time, ends when the pane unmounts."""
        await poll_forever(
            self.host.gpus.sample, show=self._sampled, fail=self._failed, idle_s=self.refresh_s,
            wanted=lambda: self.fast or self.snapshot is None or self.screen.is_current,  # out of sight: none
            wait=lambda: asyncio.sleep(min(self.refresh_s, FAST_POLL_S) if self.fast else self.refresh_s),
            timeout_s=max(5.0, 3 * self.refresh_s),
        )

    def _sampled(self, snap: GpuSnapshot) -> None:
        self.ingest(snap)
        self.refresh_stale()

    def _failed(self, reason: str) -> None:
        self.error = shown(reason)  # host text: made inert
        self.refresh_stale()

    def ingest(self, snap: GpuSnapshot) -> None:
        """Take one snapshot (also used by tests and the bench to feed fixed data)."""
        self.error = shown(snap.error) if snap.error is not None and not snap.gpus else None
        if not snap.gpus:
            self.refresh_stale()
            return
        self.snapshot = snap
        self.history.add(snap)
        self.refresh_stale()
        self.refresh(layout=True)

    def set_gpus_in_use(self, count: int | None, expected_mib: int | None = None, *, nodes: int = 1) -> None:
        """The running layout's GPUs on this host (from index 0), what each is expected to hold, for the
        colours, and over how many hosts the layout runs (`count` on each)."""
        if count != self.gpus_in_use or expected_mib != self.expected_mib or nodes != self.nodes:
            self.gpus_in_use = count
            self.expected_mib = expected_mib
            self.nodes = nodes
            self.refresh_stale()
            self.refresh()

    def verdicts(self) -> list[GpuVerdict]:
        """Each GPU against the layout's expectation (console.domain.fit.gpu_health, documented in docs/tui.md)."""
        if self.snapshot is None:
            return []
        used = range(self.gpus_in_use) if self.gpus_in_use is not None else None
        return judge_gpus(self.snapshot.gpus, used_indices=used, expected_mib=self.expected_mib)

    def toggle_processes(self) -> None:
        self.show_processes = not self.show_processes
        self.refresh(layout=True)

    def data_age_s(self) -> float | None:
        return None if self.snapshot is None else max(0.0, self.clock() - self.snapshot.taken_at)

    def refresh_stale(self) -> None:
        age = self.data_age_s()
        stale = self.error is not None or (age is not None and age > max(3 * self.refresh_s, 5.0))
        self.set_class(stale, "-stale")
        title = "GPU memory · util %"
        if self.gpus_in_use is not None and self.snapshot is not None:
            title += f" · layout uses {self.gpus_in_use} of {len(self.snapshot.gpus)}"
            if self.nodes > 1:
                title += f" here, {self.gpus_in_use * self.nodes} over {self.nodes} nodes"
        if stale:
            title += f" · STALE, data {age:.0f}s old" if age is not None else " · no data yet"
        self.border_title = title
        # A GPU's last Xid (dcgm-exporter) is a hardware finding: it goes before a layout's anomaly.
        unusual = [f.summary for f in xid_findings(self.snapshot)]
        unusual += [f"GPU {v.index}: {v.anomaly}" for v in self.verdicts() if v.anomaly]
        note = unusual[0] + (f" (+{len(unusual) - 1} more)" if len(unusual) > 1 else "") if unusual else ""
        # Host text (made inert in _failed/ingest) as a Text, never markup; before data it is the body.
        self.border_subtitle = Text(self.error or shown(note)) if self.snapshot is not None else ""
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        # One row per GPU, processes or not: `p` puts them in the sparkline's place, so the pane never
        # grows past the room the screen gave it (its rows spilled under the border).
        return 1 if self.snapshot is None else len(self.snapshot.gpus)

    def render(self) -> Text:
        snap = self.snapshot
        if snap is None:
            return Text(self.error or "waiting for the first GPU sample…", style=self.get_component_rich_style("gpu--stale"))
        width = max(40, self.content_region.width)
        spark_w = max(6, min(30, width // 6))
        name_w = 12 if width >= 70 else 0
        mib_w = 18
        if self.show_processes:  # the process cell replaces the MiB column and the sparkline
            mib_w, bar_w = 0, max(6, width // 5)
            spark_w = max(PROCESS_CELL_COLUMNS, width - 3 - (name_w + 1 if name_w else 0) - 6 - bar_w)
        else:
            bar_w = max(6, width - 3 - (name_w + 1 if name_w else 0) - mib_w - 6 - spark_w)
        out = Text(no_wrap=True, overflow="crop")
        style = self.get_component_rich_style
        by_gpu: dict[int, list[GpuProcess]] = {}
        for proc in sorted(snap.processes, key=lambda p: -(p.used_mib or 0)):
            by_gpu.setdefault(proc.gpu_index if proc.gpu_index is not None else -1, []).append(proc)
        for i, (gpu, verdict) in enumerate(zip(snap.gpus, self.verdicts(), strict=True)):
            if i:
                out.append("\n")
            used, total = gpu.used_mib, gpu.total_mib
            frac = (used / total) if used is not None and total else 0.0
            dim = self.gpus_in_use is not None and gpu.index >= self.gpus_in_use and verdict.anomaly is None
            level = "gpu--dim" if dim else LEVEL_STYLE[verdict.level]
            row_style = style("gpu--dim") if dim else None
            out.append(f"{gpu.index:>2} ", style=row_style or style("gpu--label"))
            if name_w:
                name = shown(gpu.name or "").replace("NVIDIA ", "")[:name_w].ljust(name_w)  # host text
                out.append(name + " ", style=row_style or style("gpu--label"))
            filled, empty = bar(frac, bar_w)
            out.append(filled, style=style(level))
            out.append(empty, style=style("gpu--empty"))
            if mib_w:
                mib = f"{used if used is not None else '?':>6}/{total if total is not None else '?':>6} MiB"
                out.append(f" {mib:>17}", style=row_style)
            util = f"{gpu.util_pct:>3}%" if gpu.util_pct is not None else "  -%"
            out.append(f" {util:>4} ", style=row_style)
            if self.show_processes:
                out.append(processes_cell(by_gpu.get(gpu.index, []), spark_w), style=style("gpu--proc"))
                continue
            fractions = spark_fractions(self.history.points(gpu.index), total or 0, spark_w, self.clock())
            out.append(sparkline(fractions, spark_w), style=style(level))
        return out
