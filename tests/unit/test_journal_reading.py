"""The journal worth reading: probe lines told apart, late entries put in time order, systemd stamped."""

from __future__ import annotations

import pytest

from console.domain.journal_order import insertion_index, systemd_text
from console.domain.probe_lines import is_probe_line
from console.hosts.endpoints.health import PROBE_USER_AGENT


@pytest.mark.parametrize(
    "line",
    [
        'INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK',
        '[2026-05-26 00:06:20] INFO:     127.0.0.1:40312 - "GET /health HTTP/1.1" 503 Service Unavailable',
        '(APIServer pid=4242) INFO:     127.0.0.1:33002 - "GET /v1/models HTTP/1.1" 200 OK',
        'INFO:     [::1]:51234 - "GET /health_generate HTTP/1.1" 200 OK',
        '(APIServer pid=4242) INFO:     127.0.0.1:33004 - "GET /metrics HTTP/1.1" 200 OK',  # the engine pane
        # from another address, but it says it is the console (the simulated engine logs agents)
        f'INFO:     10.0.0.7:51234 - "GET /metrics HTTP/1.1" 200 OK "{PROBE_USER_AGENT}"',
    ],
)
def test_the_consoles_probes_are_recognised(line):
    assert is_probe_line(line)


@pytest.mark.parametrize(
    "line",
    [
        'INFO:     127.0.0.1:40312 - "POST /v1/chat/completions HTTP/1.1" 200 OK',  # real traffic
        'INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK',  # a load balancer's check
        'INFO:     127.0.0.1:51234 - "GET /healthz HTTP/1.1" 404 Not Found',
        'INFO:     127.0.0.1:34344 - "GET /get_model_info HTTP/1.1" 200 OK',  # SGLang's own warm-up
        'INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK "curl/8.5.0"',  # someone else's agent
        "[2026-05-26 00:06:20 TP0] Decode batch. #running-req: 1, token usage: 0.41",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB.",
    ],
)
def test_other_lines_are_not(line):
    assert not is_probe_line(line)


def test_the_consoles_own_address_can_be_named():
    line = 'INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK'
    assert is_probe_line(line, addresses={"10.0.0.7"})


def test_the_agent_the_probe_sends_is_the_one_recognised():
    assert PROBE_USER_AGENT.startswith("serve-console/") and PROBE_USER_AGENT.endswith("(probe)")


def test_a_late_entry_goes_where_its_time_is():
    stamps = [10.0, 11.0, None, 12.0, 13.0]
    assert insertion_index(stamps, 14.0) == 5  # in order: at the end
    assert insertion_index(stamps, 11.5) == 2  # before the header, which heads what follows it
    assert insertion_index(stamps, 12.0) == 4  # equal stamps keep arrival order
    assert insertion_index(stamps, 1.0) == 0
    assert insertion_index(stamps, None) == 5
    assert insertion_index([], 3.0) == 0


def test_stop_lines_written_before_an_oom_are_read_before_it():
    # EP8's stop lines (t=100, 101) arrive after TP4 EP2's OOM (t=130)
    shown: list[tuple[float | None, str]] = [(None, "── tp4ep2 ──"), (120.0, "Load weight begin"), (130.0, "OOM")]
    for ts, text in [(100.0, "Stopping EP8"), (101.0, "Stopped EP8")]:
        shown.insert(insertion_index([t for t, _ in shown], ts), (ts, text))
    assert [text for _, text in shown] == ["Stopping EP8", "Stopped EP8", "── tp4ep2 ──", "Load weight begin", "OOM"]


def test_systemds_lines_carry_their_journal_time():
    ts = 1764580573.0  # 2025-12-01 09:16:13 UTC
    assert systemd_text("Stopping sglang-k26@ep8.service...", ts, utc=True) == (
        "Dec 01 09:16:13 systemd[1]: Stopping sglang-k26@ep8.service..."
    )
    assert systemd_text("Started x.service", None) == "systemd[1]: Started x.service"
