"""A journal write that fails (ENOSPC) ends the simulated unit truthfully (issue 10, item 6)."""

from __future__ import annotations

import errno
import os

import pytest
from sim_fixtures import EP8, fake_engine
from waiting import await_event, await_for

from console.errors import HostError

CHATTY = "import time\nwhile True:\n    print('Load weight begin. avail mem=94.00 GB', flush=True)\n    time.sleep(0.05)\n"  # deliberate: writes on


async def _wait_state(host, unit, predicate, timeout_s=30.0):
    async def reached():
        state = await host.services.state(unit)
        return state if predicate(state) else None

    return await await_for(reached, f"{unit}'s state", timeout_s=timeout_s)


async def test_a_full_disk_under_the_journal_fails_the_unit_with_result_resources(sim_hosts, monkeypatch):
    fake_engine(monkeypatch, CHATTY)
    host = sim_hosts(layout_specs=(EP8,))
    unit = host.config.services[0].unit_for(host.config.services[0].layouts[0])
    await host.services.start(unit)
    journal = host.services.unit_dir(unit) / "journal.jsonl"
    assert (await _wait_state(host, unit, lambda s: s.is_running)).is_running
    journal.unlink()
    journal.symlink_to("/dev/full")  # every write now fails with ENOSPC, as on a full disk
    state = await _wait_state(host, unit, lambda s: s.active == "failed")
    assert (state.active, state.result, state.main_pid) == ("failed", "resources", None)
    raw = (host.services.unit_dir(unit) / "state.json").read_text()
    assert '"supervisor_pid"' in raw and '"resources"' in raw  # written by the supervisor itself
    journal.unlink()  # the disk has room again: a stop returns at once, the unit is not wedged
    await await_event(host.services.stop(unit), "the stop to return")  # how soon: bench/verdict_cases.py


async def test_an_already_full_disk_is_one_line_at_start(sim_hosts, monkeypatch):
    host = sim_hosts(layout_specs=(EP8,))
    unit = host.config.services[0].unit_for(host.config.services[0].layouts[0])

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(host.services, "_spawn", full)
    with pytest.raises(HostError, match="cannot start it: No space left on device") as caught:
        await host.services.start(unit)
    assert "\n" not in str(caught.value)
