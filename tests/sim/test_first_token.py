"""Ready means a token (issue 26, item 5): a start is READY once a streamed one-token completion has
returned its first token; the switch's result carries three times in order (port open, HTTP ready, first
token); a simulated vLLM whose HTTP is up but whose scheduler never runs a step (`--fail no_token`) is
never READY; `first_token_check = false` keeps the old verdict (HTTP ready is READY)."""

from __future__ import annotations

import dataclasses

from sim_fixtures import free_port, qwen_host

from console.config import LayoutConfig
from console.domain.layout import parse_layout
from console.ops.switch.events import ResultEvent, StepEvent
from console.ops.switch.orchestrate import switch_layout


def host_with_stuck_layout(port: int, *, first_token_check: bool = True):
    cfg = qwen_host(port)
    service = cfg.services[0]
    stuck = LayoutConfig("TP4 stuck", dataclasses.replace(parse_layout("TP4"), extra_args=("--fail", "no_token")))
    service = dataclasses.replace(service, layouts=(*service.layouts, stuck), first_token_check=first_token_check)
    return dataclasses.replace(cfg, services=(service,))


async def test_a_ready_switch_gives_port_open_http_ready_and_first_token_in_order(sim_hosts) -> None:
    host = sim_hosts(host_with_stuck_layout(free_port()))
    events: list = []
    result = await switch_layout(host, None, "TP4", timeout_s=60, on_event=events.append)
    assert result.outcome == "ready", result.reason
    line = result.to_json()
    times = [line["port_open_s"], line["http_ready_s"], line["first_token_s"]]
    assert None not in times, line
    assert 0 < times[0] <= times[1] <= times[2] <= line["elapsed_s"], times
    assert "first token" in result.reason
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    assert steps.index("port-open") < steps.index("http-ready") < steps.index("first-token"), steps
    final = [e for e in events if isinstance(e, ResultEvent)]
    assert final and final[-1].result.first_token_s == result.first_token_s


async def test_http_up_without_a_token_is_never_ready(sim_hosts) -> None:
    host = sim_hosts(host_with_stuck_layout(free_port()))
    events: list = []
    result = await switch_layout(host, None, "TP4 stuck", timeout_s=20, on_event=events.append)
    assert result.outcome == "timeout", result.reason
    assert "no first token" in result.reason, result.reason
    line = result.to_json()
    assert line["http_ready_s"] is not None and line["first_token_s"] is None, line
    health = await host.probes["qwen3"].probe()
    assert health.status == "ready"  # /health said 200 the whole time: the engine's own word is not enough


async def test_first_token_check_off_is_ready_at_http_ready(sim_hosts) -> None:
    host = sim_hosts(host_with_stuck_layout(free_port(), first_token_check=False))
    result = await switch_layout(host, None, "TP4 stuck", timeout_s=60)
    assert result.outcome == "ready", result.reason
    assert result.http_ready_s is not None and result.first_token_s is None
