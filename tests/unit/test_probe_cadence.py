"""Fewer probes: a ready engine's health is asked every few seconds, anything else at once."""

from __future__ import annotations

from console.domain.values import HealthSample, UnitState
from console.ops.status import recent_health


class CountingProbe:
    def __init__(self, status: str = "ready") -> None:
        self.status = status
        self.calls = 0

    async def probe(self) -> HealthSample:
        self.calls += 1
        return HealthSample(taken_at=float(self.calls), status=self.status, http_status=200)


EP8 = [UnitState("sglang@ep8.service", "active", "running", main_pid=100)]


async def test_a_ready_engine_is_asked_once_per_interval():
    probe = CountingProbe()
    for _ in range(5):
        assert (await recent_health(probe, EP8, max_age_s=60)).status == "ready"
    assert probe.calls == 1
    await recent_health(probe, EP8, max_age_s=0)  # the interval is over
    assert probe.calls == 2


async def test_a_starting_engine_is_asked_every_time():
    probe = CountingProbe("starting")
    for _ in range(3):
        await recent_health(probe, EP8, max_age_s=60)
    assert probe.calls == 3


async def test_another_engine_or_none_running_is_asked_at_once():
    probe = CountingProbe()
    await recent_health(probe, EP8, max_age_s=60)
    restarted = [UnitState("sglang@ep8.service", "active", "running", main_pid=200)]
    await recent_health(probe, restarted, max_age_s=60)
    assert probe.calls == 2
    stopped = [UnitState("sglang@ep8.service", "inactive", "dead")]
    await recent_health(probe, stopped, max_age_s=60)
    await recent_health(probe, stopped, max_age_s=60)
    assert probe.calls == 4


async def test_a_fresh_reading_can_be_asked_for():
    probe = CountingProbe()
    await recent_health(probe, EP8, max_age_s=60)
    await recent_health(probe, EP8, max_age_s=0.0)  # what service_status(fresh_health=True) asks
    assert probe.calls == 2
