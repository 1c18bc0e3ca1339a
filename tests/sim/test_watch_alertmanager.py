"""`serve-console watch` against a real Alertmanager, on simulated hosts at a small time scale.

A failed start arrives with its card; a unit with `Restart=always` that dies every time is named as a
crash loop with the cause of its last death; an alert resolves; Alertmanager down and up again loses
no alert; the daemon restarted raises no second alert for the same incident. The alerts are read back
from Alertmanager's API (`GET /api/v2/alerts`) and `amtool`, and from the webhook its route notifies.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from alertmanager import alertmanager, alertmanager_session  # noqa: F401 (fixtures)
from sim_fixtures import sim_host_config
from watch_harness import Watch, until

from console.domain.alerts import CRASH_LOOP, ENGINE_FAILED
from console.ops.evidence import evidence_before

pytestmark = pytest.mark.slow
TIME_SCALE = 0.01
OOM_UNIT = "sim-k26@tp4ep2.service"
READY_UNIT = "sim-k26@ep8.service"


@pytest.fixture
async def watch(sim_hosts, alertmanager, tmp_path):  # noqa: F811 (the fixture imported above)
    server, capture = alertmanager
    name = f"am-{uuid.uuid4().hex[:8]}"  # Alertmanager is shared by the session: each test its own host
    host = sim_hosts(sim_host_config(name, time_scale=TIME_SCALE))
    harness = Watch(host, tmp_path / "audit.sqlite3", server.url, capture.url)
    yield harness
    await harness.stop()


async def test_a_failed_start_reaches_alertmanager_with_its_card(watch, alertmanager):  # noqa: F811
    server, capture = alertmanager
    host = watch.host.name
    watch.start()
    await watch.host.services.start(OOM_UNIT)
    found = await until(lambda: server.alerts(alertname=ENGINE_FAILED, host=host), what="the failure in Alertmanager")
    alert = found[0]
    assert alert["labels"] == {"alertname": ENGINE_FAILED, "host": host, "service": "k26", "unit": OOM_UNIT,
                               "layout": "TP4 EP2", "severity": "critical"}
    notes = alert["annotations"]
    assert notes["class"] == "cuda_oom" and "CUDA OOM on GPU" in notes["summary"]
    assert notes["figures"].startswith("GPU ") and "tried" in notes["figures"]
    # Issue 30 B4: an OOM while the weights load is no memory flag's to fix, in the alert too.
    assert notes["hint"].startswith("the GPU ran out of memory while the weights were loading") and "TP4 EP2" in notes["description"]
    assert "mem-fraction-static" not in notes["hint"]
    assert notes["rank"]
    by_amtool = server.amtool(f"alertname={ENGINE_FAILED}", f"host={host}")
    assert [a["labels"]["unit"] for a in by_amtool] == [OOM_UNIT]
    hooked = await until(lambda: [a for a in capture.alerts("/hook") if a["labels"]["host"] == host],
                         what="the webhook's delivery")
    assert hooked[0]["status"] == "firing" and hooked[0]["annotations"]["class"] == "cuda_oom"
    assert {b["authorization"] for b in capture.bodies if b["path"] == "/hook"} == {"Bearer test-token"}
    # The incident's evidence, collected beside the alert, reaches Alertmanager in its annotations.
    noted = await until(lambda: [a for a in server.alerts(alertname=ENGINE_FAILED, host=host)
                                 if a["annotations"].get("evidence")], what="the evidence's annotation")
    folder = Path(noted[0]["annotations"]["evidence"])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["trigger"] == "watch" and manifest["kind"] == ENGINE_FAILED and manifest["host"] == host
    assert any(p["name"] == "journal" and p["unit"] == OOM_UNIT and p["file"] for p in manifest["parts"])
    again = await evidence_before(watch.host, watch.host.config.services[0], "restart")
    assert again is not None and again.reused and again.path == folder  # one incident, one folder, every face


async def test_a_crash_loop_is_named_with_the_cause_of_its_last_death(watch, alertmanager):  # noqa: F811
    server, _capture = alertmanager
    host = watch.host.name
    services = watch.host.services
    await services.write_file("/etc/systemd/system/sim-k26@.service.d/restart.conf",
                              "[Service]\nRestart=always\nRestartSec=0.2\n")
    await services.daemon_reload()
    watch.start()
    await services.start(OOM_UNIT)
    found = await until(lambda: server.alerts(alertname=CRASH_LOOP, host=host), timeout_s=60,
                        what="the crash loop in Alertmanager")
    state = await services.state(OOM_UNIT)
    assert state.n_restarts >= 3  # systemd's counter, as the simulated systemd keeps it
    alert = found[0]
    assert alert["labels"]["unit"] == OOM_UNIT and alert["labels"]["severity"] == "critical"
    assert "crash-looping" in alert["annotations"]["summary"]
    assert "last death: CUDA OOM on GPU" in alert["annotations"]["summary"]
    assert alert["annotations"]["class"] == "cuda_oom"
    # the failure itself fires once for the whole loop, not once per death
    assert len(server.alerts(alertname=ENGINE_FAILED, host=host)) == 1
    await services.stop(OOM_UNIT)


async def test_an_alert_resolves_when_the_service_is_ready_again(watch, alertmanager):  # noqa: F811
    server, capture = alertmanager
    host = watch.host.name
    watch.start()
    await watch.host.services.start(OOM_UNIT)
    await until(lambda: server.alerts(alertname=ENGINE_FAILED, host=host), what="the failure")
    await watch.host.services.start(READY_UNIT)  # another layout of the service comes up ready
    await until(lambda: not server.alerts(alertname=ENGINE_FAILED, host=host), timeout_s=60,
                what="the failure to resolve in Alertmanager")
    resolved = await until(lambda: [a for a in capture.alerts("/notify") if a["labels"].get("host") == host
                                    and a["status"] == "resolved"], what="Alertmanager's resolved notification")
    assert resolved[0]["labels"]["alertname"] == ENGINE_FAILED
    assert resolved[0]["endsAt"] > resolved[0]["startsAt"]
    stored = watch.store.alerts(host=host)
    assert [(a.label("alertname"), a.firing) for a in stored] == [(ENGINE_FAILED, False)]
    assert stored[0].ends_at > stored[0].starts_at
    hooked = [a["status"] for a in capture.alerts("/hook") if a["labels"]["host"] == host]
    assert hooked == ["firing", "resolved"]


async def test_alertmanager_down_then_up_loses_no_alert(watch, alertmanager):  # noqa: F811
    server, _capture = alertmanager
    host = watch.host.name
    server.stop()
    watch.start()
    await watch.host.services.start(OOM_UNIT)
    await until(lambda: watch.store.alerts(host=host), what="the failure in the state file")
    await until(lambda: any("unreachable" in line for line in watch.lines), what="the delivery to fail")
    assert watch.store.queued(f"alertmanager {server.url}") >= 1
    sink = f"alertmanager {server.url}"
    await until(lambda: watch.store.pending(sink, 1)[0].attempts >= 2, what="a retry while it is down")
    server.start()
    found = await until(lambda: server.alerts(alertname=ENGINE_FAILED, host=host), timeout_s=30,
                        what="the queued alert once Alertmanager is back")
    assert found[0]["annotations"]["class"] == "cuda_oom"
    await until(lambda: watch.store.queued() == 0, what="the queue to drain")
    assert watch.store.counters() == {}  # nothing dropped


async def test_the_daemon_restarted_raises_no_second_alert(watch, alertmanager):  # noqa: F811
    server, capture = alertmanager
    host = watch.host.name
    watch.start()
    await watch.host.services.start(OOM_UNIT)
    first = (await until(lambda: server.alerts(alertname=ENGINE_FAILED, host=host), what="the failure"))[0]
    await until(lambda: capture.alerts("/hook"), what="the webhook's delivery")
    await watch.stop()
    watch.start()  # the same state file, as systemd's Restart=always would start it again
    for _ in range(2):  # two re-sends from the restarted daemon, each moving the alert's endsAt on
        ends = server.alerts(alertname=ENGINE_FAILED, host=host)[0]["endsAt"]
        await until(lambda ends=ends: server.alerts(alertname=ENGINE_FAILED, host=host)[0]["endsAt"] != ends,
                    what="a re-send from the restarted daemon")
    again = server.alerts(alertname=ENGINE_FAILED, host=host)
    assert len(again) == 1 and again[0]["fingerprint"] == first["fingerprint"]
    assert again[0]["startsAt"] == first["startsAt"]
    stored = watch.store.alerts(host=host)
    assert len(stored) == 1 and stored[0].firing, "\n".join(watch.lines)
    hooked = [a for a in capture.alerts("/hook") if a["labels"]["host"] == host]
    assert [a["status"] for a in hooked] == ["firing"]
    assert any("1 alerts firing from before" in line for line in watch.lines)


async def test_a_step_back_of_the_daemons_clock_does_not_resolve_a_firing_alert(watch, alertmanager):  # noqa: F811
    server, _capture = alertmanager
    host = watch.host.name
    offset = [0.0]
    watch.start(clock=lambda: time.time() - offset[0])
    await watch.host.services.start(OOM_UNIT)
    await until(lambda: server.alerts(alertname=ENGINE_FAILED, host=host), what="the failure")
    stepped_at = time.time()
    offset[0] = 3600.0  # the daemon's wall clock steps back an hour (NTP, a restored VM, date -s)

    def ends_at() -> float | None:  # Alertmanager's own view: None once it let the alert end
        found = server.alerts(alertname=ENGINE_FAILED, host=host)
        return datetime.fromisoformat(found[0]["endsAt"]).timestamp() if found else None

    # Today its end (4 re-sends, 4 s ahead) passes and Alertmanager resolves it; re-sent on time, the end
    # moves on past any end sent before the step
    await until(lambda: (end := ends_at()) is None or end > stepped_at + 4 * 1.0 + 2.0, timeout_s=60,
                what="Alertmanager to resolve the alert, or to hear its re-sends after the step")
    assert ends_at() is not None, "Alertmanager resolved a firing alert after the daemon's clock stepped back"
