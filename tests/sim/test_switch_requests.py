"""A user's prompt in the log never fails a healthy start (issue 18, A1): the switch's repro.

The simulated SGLang runs with SGLang's own `--log-requests`, so it logs each request as SGLang does
(`Receive: obj=GenerateReqInput(text='...')`). When its HTTP server is up and it warms up, the test
sends a hostile prompt; the journal is read through a wrapper that holds the ready line back until the
prompt's own line has been read, so the switch always reads the prompt before it can call the start
ready. No health probe runs: readiness comes from the journal alone.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from sim_fixtures import sim_host_config

from console.domain.layout import Layout
from console.ops.switch.events import FindingEvent, PhaseEvent
from console.ops.switch.orchestrate import switch_layout

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity "
       "of 79.19 GiB of which 1.20 GiB is free.")
KILLED = "Main process exited, code=killed, status=9/KILL"
LOGGED = ("LOGGED", Layout(tp=8, ep=8, extra_args=("--log-requests",)))
UNIT = "sim-k26@logged.service"


class _PromptDuringWarmUp:
    """The unit's journal, with a client's prompt sent once SGLang's HTTP server is up; the ready line
    waits until the prompt's own `Receive:` line has been read."""

    def __init__(self, inner, url: str, prompt: str) -> None:
        self._inner = inner
        self.url = url
        self.prompt = prompt
        self.sent: asyncio.Task | None = None

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def _send(self) -> None:
        body = {"text": self.prompt, "sampling_params": {"max_new_tokens": 2}}
        async with aiohttp.ClientSession() as session, session.post(f"{self.url}/generate", json=body) as resp:
            await resp.read()

    async def _follow(self, unit, after_cursor, lines):
        held, prompt_read = [], False
        async for entry in self._inner.journal(unit, after_cursor=after_cursor, follow=True, lines=lines):
            if "Uvicorn running on" in entry.message and self.sent is None:
                self.sent = asyncio.create_task(self._send())
            if "Receive: obj=" in entry.message and repr(self.prompt) in entry.message:
                prompt_read = True
            if "ready to roll" in entry.message or held:
                held.append(entry)
            else:
                yield entry
            if prompt_read:
                for late in held:
                    yield late
                held.clear()

    def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        if not follow:
            return self._inner.journal(unit, after_cursor=after_cursor, follow=False, lines=lines)
        return self._follow(unit, after_cursor, lines)


@pytest.mark.parametrize("prompt", [OOM, KILLED, f"{UNIT}: {KILLED}"], ids=["oom", "killed", "unit-killed"])
async def test_a_hostile_prompt_during_warm_up_leaves_the_start_ready(sim_hosts, prompt):
    host = sim_hosts(sim_host_config(layout_specs=(LOGGED,)))
    host.probes.clear()  # readiness from the journal's ready line alone
    journal = _PromptDuringWarmUp(host.services, host.config.services[0].url, prompt)
    host.services = journal
    audit = sim_hosts.audit()
    events = []
    result = await switch_layout(host, None, "LOGGED", audit=audit, rollback=True, timeout_s=60,
                                 on_event=events.append)
    assert journal.sent is not None
    await journal.sent
    assert result.outcome == "ready", result.reason
    assert result.failure is None and result.rollback is None
    assert not [e for e in events if isinstance(e, FindingEvent)]
    assert [e.phase.value for e in events if isinstance(e, PhaseEvent)][-1] == "ready"
    (entry,) = audit.entries()
    assert entry.outcome == "ready" and entry.failure is None
    assert prompt not in json.dumps(entry.to_json())  # nothing of the prompt stored as a cause
    # The prompt really was in the journal, in SGLang's own request-log format, before the switch ended.
    lines = [e.message async for e in journal._inner.journal(UNIT, follow=False)]
    received = [line for line in lines if f"Receive: obj=GenerateReqInput(text={prompt!r}" in line]
    assert received and received[0].startswith("[") and "] Receive: obj=" in received[0]
