"""The watch daemon's rules, pure: when each alert fires, when it resolves, and that its identity holds."""

from __future__ import annotations

from dataclasses import replace

from console.domain.alerts import (
    CRASH_LOOP,
    ENGINE_FAILED,
    FIRING,
    GPU_XID,
    HEALTH_DOWN,
    HEALTH_FLAPPING,
    HOST_UNREACHABLE,
    KV_CACHE_HIGH,
    RANK_DEAD,
    RESOLVED,
    START_HUNG,
    UPDATED,
    AlertBook,
    AlertThresholds,
    Condition,
    HostWatch,
    RankLiveness,
    Scope,
    ServiceWatch,
    Verdict,
    alert_from,
)
from console.domain.values import Finding, FindingClass, OomFigures, Phase, ReadinessEvent, UnitState

T = AlertThresholds(crash_loop_restarts=3, crash_loop_window_s=600, start_hang_s=600, unreachable_s=60,
                    flapping_changes=4, flapping_window_s=300, kv_usage_ratio=0.95, kv_usage_for_s=300)
UNIT = "sglang-k26@tp4ep2.service"
OOM = Finding(FindingClass.CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried ...",
              "CUDA OOM on GPU 2 (TP2 EP1): tried 672.00 MiB with 224.96 MiB free of 94.97 GiB", rank="TP2 EP1",
              oom=OomFigures(2, 672 << 20, 101970165760, 235888476, 101734277284), hint="lower --mem-fraction-static")
DIED = Finding(FindingClass.UNIT_FAILED, "x.service: Main process exited, code=exited, status=1/FAILURE",
               "x.service: main process exited with status 1/FAILURE")


class Rig:
    """One service's rules and a book, judged by hand."""

    def __init__(self, thresholds: AlertThresholds = T, now: float = 1000.0, book: AlertBook | None = None) -> None:
        self.now = now
        self.service = ServiceWatch("gpu-1", "k26", [UNIT, "sglang-k26@ep8.service"], thresholds, now)
        self.service.layouts = {UNIT: "TP4 EP2", "sglang-k26@ep8.service": "EP8"}
        self.host = HostWatch("gpu-1", thresholds, now)
        self.book = book or AlertBook(thresholds)
        self.reachable = True
        """Each judgement follows a good reading of the host (the daemon's poll), unless a test says not."""

    @property
    def unit(self):
        return self.service.units[UNIT]

    def judge(self, at: float | None = None) -> list[tuple[str, str]]:
        self.now = at if at is not None else self.now
        if self.reachable:
            self.host.reached(self.now)
        verdicts = self.host.verdicts(self.now, self.book.active_for("gpu-1"))
        verdicts += self.service.verdicts(self.now, self.book.active_for("gpu-1", "k26"))
        return [(t.kind, t.alert.label("alertname")) for t in self.book.apply(verdicts, self.now)]

    def firing(self, alertname: str):
        return [a for a in self.book.firing.values() if a.label("alertname") == alertname]

    def state(self, active: str, sub: str, *, result: str = "success", n: int | None = 0, since: float | None = None,
              pid: int | None = None, unit: str = UNIT) -> None:
        self.service.units[unit].observe(UnitState(unit, active, sub, result=result, n_restarts=n, since=since,
                                                   main_pid=pid), self.now)

    def start(self, ts: float) -> None:
        self.unit.phase_seen(ReadinessEvent(Phase.STARTING, ts), by_systemd=True)

    def death(self, ts: float, cause: Finding = OOM) -> None:
        self.unit.fatal(cause, ts, root=cause.cls is not FindingClass.UNIT_FAILED)
        self.unit.phase_seen(ReadinessEvent(Phase.FAILED, ts), by_systemd=True)


def test_a_root_cause_fires_at_once_with_the_card_and_a_summary_waits_for_its_cause():
    rig = Rig()
    rig.start(1000.0)
    rig.death(1001.0)
    assert rig.judge(1001.0) == [(FIRING, ENGINE_FAILED)]
    alert = rig.firing(ENGINE_FAILED)[0]
    assert dict(alert.labels) == {"alertname": ENGINE_FAILED, "host": "gpu-1", "service": "k26", "unit": UNIT,
                                  "layout": "TP4 EP2", "severity": "critical"}
    notes = dict(alert.annotations)
    assert notes["class"] == "cuda_oom" and notes["rank"] == "TP2 EP1" and notes["hint"] == "lower --mem-fraction-static"
    assert notes["figures"] == "GPU 2: tried 672.00 MiB, free 224.96 MiB of 94.97 GiB, in use 94.75 GiB"
    assert alert.starts_at == 1001.0
    summary_only = Rig()
    summary_only.start(1000.0)
    summary_only.death(1001.0, DIED)
    assert summary_only.judge(1001.1) == []  # systemd's exit status: its cause may follow in the journal
    assert summary_only.judge(1001.5) == [(FIRING, ENGINE_FAILED)]


def test_a_failure_the_state_shows_first_waits_for_the_journal_then_fires():
    rig = Rig()
    rig.state("failed", "failed", result="exit-code", since=999.0)
    assert rig.judge(1000.5) == []
    assert rig.judge(1002.1) == [(FIRING, ENGINE_FAILED)]
    assert "failed (failed/failed, result exit-code)" in rig.firing(ENGINE_FAILED)[0].annotation("summary")


def test_the_failure_resolves_when_a_later_start_is_ready_not_before():
    rig = Rig()
    rig.start(1000.0)
    rig.death(1001.0)
    rig.judge(1001.0)
    rig.start(1002.0)  # restarted: still the same incident
    assert rig.judge(1003.0) == []
    rig.unit.phase_seen(ReadinessEvent(Phase.READY, 1010.0), by_systemd=False)
    assert rig.judge(1010.0) == [(RESOLVED, ENGINE_FAILED)]


def test_another_layout_ready_resolves_the_failure_of_the_one_that_died():
    rig = Rig()
    rig.start(1000.0)
    rig.death(1001.0)
    rig.judge(1001.0)
    rig.state("active", "running", since=1005.0, pid=7, unit="sglang-k26@ep8.service")
    rig.service.observe_health(True, 1006.0)
    assert rig.judge(1006.0) == [(RESOLVED, ENGINE_FAILED)]


def test_a_crash_loop_fires_at_the_nth_restart_named_with_the_last_cause_and_resolves_after_a_quiet_window():
    rig = Rig()
    for i in range(3):
        rig.start(1000.0 + 10 * i)
        rig.death(1001.0 + 10 * i)
    rig.start(1030.0)  # the third restart
    assert (FIRING, CRASH_LOOP) in rig.judge(1030.0)
    alert = rig.firing(CRASH_LOOP)[0]
    assert alert.starts_at == 1030.0
    assert "3 restarts in 10 min; last death: CUDA OOM on GPU 2" in alert.annotation("summary")
    assert rig.judge(1500.0) == []  # under 3 in the window now, but not a whole quiet window yet
    assert rig.judge(1631.0) == [(RESOLVED, CRASH_LOOP)]


def test_systemds_restart_counter_alone_names_a_crash_loop():
    rig = Rig()
    rig.state("activating", "auto-restart", result="exit-code", n=14_997)
    rig.judge(1000.0)
    rig.now = 1005.0
    rig.state("activating", "auto-restart", result="exit-code", n=15_000)
    assert (FIRING, CRASH_LOOP) in rig.judge(1005.0)
    assert "systemd's restart counter: 15000" in rig.firing(CRASH_LOOP)[0].annotation("description")


def test_a_start_with_no_new_phase_for_the_threshold_hangs_and_progress_ends_it():
    rig = Rig()
    rig.state("active", "running", since=1000.0, pid=5)
    rig.unit.phase_seen(ReadinessEvent(Phase.LOADING_WEIGHTS, 1100.0, progress=0.5), by_systemd=False)
    assert rig.judge(1699.0) == []
    assert rig.judge(1701.0) == [(FIRING, START_HUNG)]
    assert "still loading_weights" in rig.firing(START_HUNG)[0].annotation("summary")
    rig.unit.phase_seen(ReadinessEvent(Phase.LOADING_WEIGHTS, 1702.0, progress=0.6), by_systemd=False)
    assert rig.judge(1702.0) == [(RESOLVED, START_HUNG)]


def test_kv_usage_fires_after_its_duration_and_resolves_below():
    rig = Rig()
    for t in range(1000, 1301, 60):
        rig.service.observe_engine(0.97, 2, float(t))
    assert rig.judge(1299.0) == []
    assert rig.judge(1300.0) == [(FIRING, KV_CACHE_HIGH)]
    assert "now 97.0%" in rig.firing(KV_CACHE_HIGH)[0].annotation("summary")
    rig.service.observe_engine(0.5, 2, 1310.0)
    assert rig.judge(1310.0) == [(RESOLVED, KV_CACHE_HIGH)]


def test_health_flapping_fires_at_four_changes_in_five_minutes():
    rig = Rig()
    for i, ready in enumerate([True, False, True, False, True]):
        rig.service.observe_health(ready, 1000.0 + 10 * i)
    assert rig.judge(1040.0) == [(FIRING, HEALTH_FLAPPING)]
    assert rig.judge(1300.0) == []
    assert rig.judge(1341.0) == [(RESOLVED, HEALTH_FLAPPING)]


def test_health_down_while_a_ready_unit_runs_fires_after_its_threshold_and_resolves_when_ready():
    rig = Rig(replace(T, health_down_s=180))
    rig.state("active", "running", since=1000.0, pid=5)
    rig.service.observe_health(True, 1010.0)  # the start was ready
    for t in range(1020, 1200, 20):
        rig.service.health_down(float(t), "unreadable: timed out")
    assert rig.judge(1199.0) == []
    assert rig.judge(1200.0) == [(FIRING, HEALTH_DOWN)]
    (alert,) = rig.firing(HEALTH_DOWN)
    assert alert.label("unit") == UNIT and "(unreadable: timed out)" in alert.annotation("summary")
    assert rig.judge(1300.0) == []  # still down: one incident
    rig.service.observe_health(True, 1310.0)
    assert rig.judge(1310.0) == [(RESOLVED, HEALTH_DOWN)]


def test_health_down_during_a_start_that_never_was_ready_is_not_health_down():
    rig = Rig(replace(T, health_down_s=180))
    rig.state("active", "running", since=1000.0, pid=5)
    for t in range(1000, 1400, 20):
        rig.service.observe_health(False, float(t), "starting")
    assert HEALTH_DOWN not in [name for _kind, name in rig.judge(1400.0)]  # ServeStartHung's, in time


def test_a_host_unreadable_for_a_minute_is_unreachable_and_its_units_alerts_stay():
    rig = Rig()
    rig.start(1000.0)
    rig.death(1001.0)
    rig.judge(1001.0)
    rig.reachable = False
    rig.host.missed("gpu-1: connection lost")
    host_verdicts = rig.host.verdicts(1061.0, rig.book.active_for("gpu-1"))
    changes = rig.book.apply(host_verdicts, 1061.0)  # the host could not be read: only its host rules judge
    assert [(t.kind, t.alert.label("alertname")) for t in changes] == [(FIRING, HOST_UNREACHABLE)]
    assert "(gpu-1: connection lost)" in rig.firing(HOST_UNREACHABLE)[0].annotation("summary")
    assert rig.firing(ENGINE_FAILED)
    rig.host.reached(1070.0)
    assert (RESOLVED, HOST_UNREACHABLE) in rig.judge(1070.0)


def test_an_xid_fires_per_host_and_resolves_when_the_gpus_read_clean():
    rig = Rig()
    xid = Finding(FindingClass.GPU_XID, 'DCGM_FI_DEV_XID_ERRORS{gpu="1"} 79',
                  "GPU 1 reported Xid 79 (GPU has fallen off the bus)", fatal=False, ts=1000.0)
    rig.host.observe_gpus([xid])
    assert (FIRING, GPU_XID) in rig.judge(1000.0)
    rig.host.observe_gpus([])
    assert (RESOLVED, GPU_XID) in rig.judge(1010.0)


def test_a_rank_dead_for_its_threshold_fires_only_where_ranks_are_reported():
    rig = Rig(replace(T, rank_dead_s=60))
    assert all(v.scope.alertname != RANK_DEAD for v in rig.service.verdicts(1000.0, frozenset()))
    ranks = [RankLiveness("node 0", "gpu-1"), RankLiveness("node 1", "gpu-2", "sglang-k26-n1.service", False,
                                                            "no heartbeat")]
    rig.service.observe_ranks(ranks, 1000.0)
    assert rig.judge(1059.0) == []
    assert rig.judge(1061.0) == [(FIRING, RANK_DEAD)]
    assert "rank node 1 on gpu-2 is not alive (no heartbeat)" in rig.firing(RANK_DEAD)[0].annotation("summary")
    rig.service.observe_ranks([RankLiveness("node 1", "gpu-2", "sglang-k26-n1.service")], 1070.0)
    assert rig.judge(1070.0) == [(RESOLVED, RANK_DEAD)]


def test_after_a_restart_of_the_daemon_the_same_incident_goes_on_without_a_second_alert():
    first = Rig()
    first.start(1000.0)
    first.death(1001.0)
    first.state("activating", "auto-restart", result="exit-code", n=3)
    first.judge(1001.0)
    fired = first.firing(ENGINE_FAILED)[0]
    book = AlertBook(T)
    book.restore([replace(fired, id=1)])
    second = Rig(now=2000.0, book=book)
    assert second.judge(2000.0) == []  # nothing read yet: kept as it is
    second.state("active", "running", since=1999.0, pid=9)  # a restart in progress: not over
    assert second.judge(2000.5) == []
    second.state("failed", "failed", result="exit-code", since=2001.0)
    assert second.judge(2004.0) == [(UPDATED, ENGINE_FAILED)]  # the card now from the state; the same incident
    assert [a.starts_at for a in second.firing(ENGINE_FAILED)] == [1001.0]


def test_a_stopped_unit_resolves_its_failure_on_clean_evidence_only():
    book = AlertBook(T)
    rig = Rig(book=book)
    rig.start(1000.0)
    rig.death(1001.0)
    rig.judge(1001.0)
    rig.state("inactive", "dead", result="success")
    assert rig.judge(1005.0) == [(RESOLVED, ENGINE_FAILED)]


def test_alert_text_is_redacted_and_printable_and_the_fingerprint_ignores_annotations():
    hostile = Condition(ENGINE_FAILED, "gpu-1", "k26", UNIT, summary="died: api_key='sk-123' \x1b]52;c;AAAA\x07 x",
                        hint="\u202eevil")
    alert = alert_from(hostile, "critical", 1.0)
    assert "sk-123" not in alert.annotation("summary") and "\\x1b" in alert.annotation("summary")
    assert alert.annotation("hint") == "\\u202eevil"
    other = alert_from(replace(hostile, summary="something else"), "critical", 2.0)
    assert other.fingerprint == alert.fingerprint
    assert alert_from(replace(hostile, unit="other.service"), "critical", 1.0).fingerprint != alert.fingerprint
    long = alert_from(replace(hostile, description="x" * 10_000), "critical", 1.0)
    assert len(long.annotation("description")) == 2000


def test_a_scope_not_judged_keeps_its_alerts():
    book = AlertBook(T)
    cond = Condition(KV_CACHE_HIGH, "gpu-1", "k26", summary="high")
    book.apply([Verdict(Scope(KV_CACHE_HIGH, "gpu-1", "k26"), (cond,))], 1.0)
    assert book.apply([Verdict(Scope(KV_CACHE_HIGH, "gpu-2", "k26"))], 2.0) == []
    assert [t.kind for t in book.apply([Verdict(Scope(KV_CACHE_HIGH, "gpu-1", "k26"))], 3.0)] == [RESOLVED]


def test_a_journal_read_again_counts_each_restart_once():
    rig = Rig()
    for _replay in range(2):  # the same entries twice: the daemon let go of the unit and read it again
        for i in range(2):
            rig.start(1000.0 + 10 * i)
            rig.death(1001.0 + 10 * i)
        rig.start(1020.0)
    assert rig.unit.restarts(1030.0) == 2
    assert (FIRING, CRASH_LOOP) not in rig.judge(1030.0)


def test_the_consoles_own_starts_are_no_restarts_of_a_crash_loop():
    rig = Rig()
    for i in range(3):  # an operator forcing the layout that dies, three times, then its rollback
        rig.death(1000.0 + 20 * i)
        rig.start(1005.0 + 20 * i)
    rig.unit.console_starts = ((1003.0, 1010.0), (1023.0, 1030.0), (1043.0, 1050.0))  # the audit log's switches
    assert CRASH_LOOP not in [name for _kind, name in rig.judge(1060.0)]
    rig.death(1070.0)  # then it dies and restarts on its own, three times
    rig.start(1071.0)
    rig.death(1080.0)
    rig.start(1081.0)
    assert CRASH_LOOP not in [name for _kind, name in rig.judge(1085.0)]
    rig.death(1090.0)
    rig.start(1091.0)
    assert (FIRING, CRASH_LOOP) in rig.judge(1095.0)
    assert "3 restarts in 10 min" in rig.firing(CRASH_LOOP)[0].annotation("summary")
