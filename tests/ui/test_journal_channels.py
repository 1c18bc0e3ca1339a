"""During a switch, each unit's journal is one stream: the pane and the switch's watcher share it.

On an SSH host each `journalctl -f` is a channel of the connection (OpenSSH allows 10), so this is the
count of journal channels a host holds during a switch (it was 2 for the starting unit before the hub).
"""

from __future__ import annotations

from collections import Counter

from waiting import settle

from console.ui.widgets.switch_progress import SwitchPanel


class CountingJournal:
    """Wraps a service manager; counts the journal streams open per unit, now and at most."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.open_now: Counter[str] = Counter()
        self.most_open: Counter[str] = Counter()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def journal(self, unit, **kwargs):
        follow = kwargs.get("follow", True)
        if follow:
            self.open_now[unit] += 1
            self.most_open[unit] = max(self.most_open[unit], self.open_now[unit])
        try:
            async for entry in self.inner.journal(unit, **kwargs):
                yield entry
        finally:
            if follow:
                self.open_now[unit] -= 1


async def test_a_switch_holds_one_journal_stream_per_unit(demo_app) -> None:
    app = demo_app(demo_start=True)
    host = app.hosts["demo"]
    counting = CountingJournal(host.services)
    host.services = counting
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.host_screen("demo")
        assert screen is not None
        assert await settle(pilot, lambda: screen.is_mounted and screen.query_one(SwitchPanel).finished, timeout_s=60)
        assert screen.query_one(SwitchPanel).outcome == "ready"
        assert counting.most_open, "no journal was followed"
        assert max(counting.most_open.values()) == 1, dict(counting.most_open)
