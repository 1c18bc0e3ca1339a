"""A day of a fleet's events through the watch daemon's rules, its book, its state file and its outbox, fast.

bench/alert_latency.py's memory part. Time is simulated (a clock stepped 10 s at a time): 20 hosts with
one service of two units each, read every step as the daemon reads them:

- host 0: a unit that dies and restarts every 20 s all day (the kodosumi#75 crash loop: 4,320 restarts);
- hosts 1-4: a failed start at :05 every hour, ready again at :15;
- hosts 5-9: KV usage at 97% from :20 to :35 every hour;
- hosts 10-14: /health flapping for 3 minutes every 2 hours;
- hosts 15-19: unreadable from :40 to :45 every 3 hours;

while Alertmanager is down from hour 10 to hour 14, so its queue fills to its bound (50 here) and
drops. Every transition is written to the state file and queued as the daemon does; the deliverer
drains the queues every simulated minute. tracemalloc's current size and the RSS are taken at hours 1,
6, 12, 18 and 24.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from pathlib import Path

from console.domain.alerts import FIRING, UPDATED, AlertBook, AlertThresholds, HostWatch, ServiceWatch
from console.domain.values import Finding, FindingClass, Phase, ReadinessEvent, UnitState
from console.hosts.endpoints import DeliveryError
from console.ops.watch import ALERTMANAGER, WEBHOOK, AlertStore, Deliverer, Outbox, Sink

STEP_S = 10.0
HOSTS = 20
UNITS = ("llm@tp8.service", "llm@ep8.service")
T0 = 1_800_000_000.0
MARKS_H = (1, 6, 12, 18, 24)
OOM = Finding(FindingClass.CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB. " * 3,
              "CUDA OOM on GPU 2 (TP2 EP1): tried 672.00 MiB with 224.96 MiB free of 94.97 GiB", rank="TP2 EP1",
              hint="lower --mem-fraction-static")


class Destination:
    """A poster that counts what it is sent, down from hour 10 to hour 14 (keeps nothing it is sent)."""

    def __init__(self, name: str, clock: list[float]) -> None:
        self.name = name
        self.clock = clock
        self.received = 0

    async def post(self, document: object) -> None:
        if 10 <= (self.clock[0] - T0) / 3600 < 14:
            raise DeliveryError(f"{self.name}: unreachable (connection refused)", retry=True)
        self.received += 1

    async def close(self) -> None:
        pass


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def feed(i: int, host: HostWatch, service: ServiceWatch, t: float, now: float) -> None:
    """One step's readings of host i, `t` seconds into the day."""
    minute = (t % 3600) / 60
    hour = int(t // 3600)
    if not (i >= 15 and hour % 3 == 0 and 40 <= minute < 45):
        host.reached(now)
    host.observe_gpus(())
    unit = service.units[UNITS[0]]
    if i == 0:  # dies every 20 s, restarted 10 s later
        if int(t / STEP_S) % 2 == 0:
            unit.phase_seen(ReadinessEvent(Phase.STARTING, now), by_systemd=True)
            unit.observe(UnitState(UNITS[0], "active", "running", main_pid=1000 + int(t), n_restarts=int(t // 20),
                                   since=now), now)
        else:
            unit.fatal(OOM, now, root=True)
            unit.phase_seen(ReadinessEvent(Phase.FAILED, now), by_systemd=True)
            unit.observe(UnitState(UNITS[0], "activating", "auto-restart", result="exit-code",
                                   n_restarts=int(t // 20), since=now), now)
        service.observe_health(False, now)
        return
    if 1 <= i <= 4 and 5 <= minute < 15:
        if minute == 5:
            unit.fatal(OOM, now, root=True)
        unit.observe(UnitState(UNITS[0], "failed", "failed", result="exit-code", since=T0 + hour * 3600 + 300), now)
        service.observe_health(False, now)
        return
    unit.observe(UnitState(UNITS[0], "active", "running", main_pid=100 + hour, since=T0 + hour * 3600 + 900), now)
    flapping = 10 <= i <= 14 and hour % 2 == 0 and 50 <= minute < 53
    service.observe_health(not flapping or int(t / STEP_S) % 2 == 0, now)
    kv_high = 5 <= i <= 9 and 20 <= minute < 35
    service.observe_engine(0.97 if kv_high else 0.4, 3, now)


async def _day(path: Path, hours: float) -> dict:
    clock = [T0]
    thresholds = AlertThresholds()
    store = AlertStore(path, queue_max=50)
    book = AlertBook(thresholds)
    watches = {f"h{i:02d}": (HostWatch(f"h{i:02d}", thresholds, T0),
                             ServiceWatch(f"h{i:02d}", "llm", UNITS, thresholds, T0)) for i in range(HOSTS)}
    posters = [Destination("alertmanager http://am", clock), Destination("webhook http://hook", clock)]
    sinks = [Sink(posters[0], ALERTMANAGER), Sink(posters[1], WEBHOOK)]  # type: ignore[arg-type]
    deliverer = Deliverer(Outbox(store, lambda line: None), sinks, resend_s=60.0,
                          firing=lambda: list(book.firing.values()), say=lambda line: None,
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    traced: dict[int, int] = {}
    rss: dict[int, int] = {}
    transitions = 0
    started = time.perf_counter()
    tracemalloc.start()
    for step in range(int(hours * 3600 / STEP_S) + 1):
        t = step * STEP_S
        now = clock[0] = T0 + t
        for i, (name, (host, service)) in enumerate(watches.items()):
            feed(i, host, service, t, now)
            verdicts = host.verdicts(now, book.active_for(name)) + service.verdicts(now, book.active_for(name, "llm"))
            for transition in book.apply(verdicts, now):
                transitions += 1
                stored = store.record(transition)
                if transition.kind in (FIRING, UPDATED):
                    book.stored(stored)
                if transition.kind != UPDATED:
                    store.enqueue([s.name for s in sinks], transition.kind, stored)
        if step % 6 == 0:
            await deliverer.deliver_due(now)
            await asyncio.sleep(0)  # the daemon's loop runs between readings: let it run what the round scheduled
        if t % 3600 == 0 and int(t // 3600) in MARKS_H:
            gc.collect()
            traced[int(t // 3600)] = tracemalloc.get_traced_memory()[0]
            rss[int(t // 3600)] = rss_bytes()
    tracemalloc.stop()
    counters = store.counters()
    store.close()
    marks = sorted(traced)
    growth = traced[marks[-1]] - traced[6] if 6 in traced and len(marks) > 1 else 0
    return {"hosts": HOSTS, "hours": hours, "transitions": transitions, "traced_bytes": traced, "rss_bytes": rss,
            "growth_after_h6_bytes": growth, "dropped": sum(v for k, v in counters.items() if k.startswith("dropped")),
            "delivered_posts": sum(p.received for p in posters), "real_s": time.perf_counter() - started}


def memory_day(path: Path, *, hours: float = 24.0) -> dict:
    """Run the simulated day; its figures."""
    return asyncio.run(_day(path, hours))
