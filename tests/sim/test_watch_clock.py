"""A step of the watch daemon's wall clock: its windows are timed on a clock that never steps, so a crash
loop's window does not end at once when the clock jumps forward, and nothing resolves for it."""

from __future__ import annotations

from sim_fixtures import sim_host_config

from console.config import ConsoleConfig, WatchConfig
from console.domain.alerts import CRASH_LOOP, AlertThresholds
from console.ops.watch import AlertStore, WatchDaemon

UNIT = "sim-k26@tp4ep2.service"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_a_forward_step_of_the_wall_clock_does_not_end_a_crash_loop(sim_hosts, tmp_path):
    host = sim_hosts(sim_host_config("step"))
    config = ConsoleConfig(path=tmp_path / "hosts.toml", hosts=(host.config,),
                           watch=WatchConfig(thresholds=AlertThresholds(crash_loop_restarts=3)))
    store = AlertStore(tmp_path / "audit.sqlite3")
    wall, steady = Clock(1_000_000.0), Clock(50.0)
    daemon = WatchDaemon([host], config, store, [], say=lambda line: None, clock=wall, monotonic=steady)
    unit = daemon.service_watches["step"][host.config.services[0].name].units[UNIT]
    for i in range(4):  # four restarts within the last minute, as systemd's counter read them
        unit.restarts_counted.add(wall.now - 60 + 10 * i)
    fired = daemon.evaluate("step")
    assert [(t.kind, t.alert.label("alertname")) for t in fired] == [("firing", CRASH_LOOP)], fired
    wall.now += 3600  # the wall clock jumps an hour ahead; 5 s pass
    steady.now += 5
    assert daemon.evaluate("step") == []  # still crash-looping: nothing resolved (nor the host unread)
    assert [a.label("alertname") for a in store.firing()] == [CRASH_LOOP]
    steady.now += 600  # a whole quiet window later, by the clock that never steps
    (resolved,) = [t for t in daemon.evaluate("step") if t.alert.label("alertname") == CRASH_LOOP]
    assert resolved.kind == "resolved" and resolved.alert.ends_at == wall.now  # stamped on the wall clock
    store.close()
