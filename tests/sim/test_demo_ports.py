"""Every console opened on a simulated host's state reaches the port its running unit serves on (the demo
moves off a taken port; the repo's hosts.toml does not), a start on a port another program holds is
refused in one line, and a 200 on the port of a service that does not run is another program's answer,
named, never the service's readiness."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from dataclasses import replace

import pytest
from sim_fixtures import EP8, TP8, engine_pids, free_port, sim_host_config
from waiting import wait_for

from console.ops.status import service_status
from console.ops.switch.orchestrate import switch_layout
from console.ops.views import FitCache, service_view

ANSWERS_200 = """
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


@pytest.fixture
def foreign_server():
    """Another program answering 200 on a port (its own process, so it has a pid of its own)."""
    started = []

    def start(port: int) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", ANSWERS_200, str(port)])
        started.append(proc)

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    return True
            except OSError:
                return False

        wait_for(answers, f"the stand-in server on port {port}")
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


async def test_a_console_reaches_the_running_unit_where_it_serves(sim_hosts):
    moved = sim_host_config(layout_specs=(EP8, TP8))  # where the demo really serves (it moved)
    configured = replace(moved, services=(replace(moved.services[0], url=f"http://127.0.0.1:{free_port()}"),))
    demo = sim_hosts(moved)
    assert (await switch_layout(demo, None, "EP8", timeout_s=60)).outcome == "ready"

    repo = sim_hosts(configured)  # the repo's hosts.toml: same host and state, the packaged port
    assert repo.probes["k26"].url == moved.services[0].url
    status = await service_status(repo, repo.config.services[0])
    assert status.active_layout == "EP8" and status.health.status == "ready"
    assert (await switch_layout(repo, None, "TP8", timeout_s=60)).outcome == "ready"
    again = sim_hosts(configured)
    assert again.probes["k26"].url == moved.services[0].url  # TP8 took the port EP8 served on
    assert (await service_status(again, again.config.services[0])).health.status == "ready"


async def test_a_start_on_a_port_another_program_holds_is_refused_in_one_line(sim_hosts, foreign_server):
    port = free_port()
    holder = foreign_server(port)
    host = sim_hosts(sim_host_config(layout_specs=(EP8,), port=port))
    result = await switch_layout(host, None, "EP8", timeout_s=60)
    assert result.outcome == "failed"
    assert f"port {port} of http://127.0.0.1:{port} is taken by pid {holder.pid} (" in result.reason
    assert "\n" not in result.reason and engine_pids(sim_hosts.state_root) == []


async def test_a_200_on_the_port_of_a_service_that_does_not_run_is_named_as_another_programs(
        sim_hosts, foreign_server):
    port = free_port()
    holder = foreign_server(port)
    host = sim_hosts(sim_host_config(layout_specs=(EP8,), port=port))
    status = await service_status(host, host.config.services[0])
    assert status.health.status == "foreign" and status.health.http_status == 200
    assert status.health.error.startswith(f"port {port} answered by pid {holder.pid} (")
    assert status.health.error.endswith("not by a unit of k26") and "-c" in status.health.error
    assert status.to_json()["health"]["status"] == "foreign"
    view = await service_view(host, host.config.services[0], fits=FitCache())
    assert view.phase is not None and view.phase.value == "failed"

