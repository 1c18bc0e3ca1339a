"""`serve-console web --demo`: the server owns one demo cluster, and every visitor attaches to it.

A visitor's app started as `--demo` would bring up a cluster of its own (its own engines, ports and state
dir, eight simulated GPUs per browser tab). Instead the server does what the TUI's `--demo` does, once:
it reserves the demo's ports, brings the first layout (EP8) up when nothing runs, and at the end stops
every unit that runs then but did not when it started. Visitors open the same config and state dir,
so they all watch the same engines, and a switch one of them makes (with --allow-actions) the others see.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from console.config import ConsoleConfig
from console.domain.safe_text import shown
from console.errors import ConsoleError
from console.factory import open_hosts
from console.ops.audit import open_audit
from console.ops.status import kill_started_units, running_units
from console.ops.switch import headline, switch_layout
from console.shutdown import SHUTDOWN
from console.ui.app import DEMO_FIRST_LAYOUT

#: How long stopping one demo unit may take at the end.
STOP_UNIT_S = 15.0


class DemoOwner:
    """The web server's demo cluster."""

    def __init__(self, config: ConsoleConfig, state_root: Path, *, start_first: bool,
                 say: Callable[[str], None]) -> None:
        """Args:
            config: the demo config, its ports reserved for this process.
            state_root: the state dir its units run in (the visitors get the same).
            start_first: bring EP8 up when nothing runs (not under the server's own --readonly).
            say: prints a line for the operator.
        """
        self.config, self.state_root, self.start_first, self.say = config, state_root, start_first, say
        self.hosts = open_hosts(config, state_dir=state_root)
        self._at_start: set[tuple[str, str]] | None = None

    def visitor_urls(self) -> list[str]:
        """`HOST/SERVICE=URL` for each service: the ports this process reserved, which visitors keep."""
        return [f"{h.name}/{s.name}={s.url}" for h in self.config.hosts for s in h.services]

    async def bring_up(self) -> None:
        """Note what runs; bring the first layout up when nothing does (as `serve-console --demo` does)."""
        self._at_start = at_start = await running_units(self.hosts)
        # Past the shutdown's deadline, what the demo started is killed before the server exits.
        SHUTDOWN.last_resort("the web demo's units", lambda: kill_started_units(self.hosts, at_start))
        if not self.start_first or self._at_start:
            return
        for host in self.hosts:
            service = next((s for s in host.config.services if s.layout(DEMO_FIRST_LAYOUT)), None)
            if service is None:
                continue
            self.say(f"serve-console web: demo: bringing {DEMO_FIRST_LAYOUT} up on {host.name}/{service.name}")
            try:
                audit = open_audit(self.state_root)
                try:
                    result = await switch_layout(host, service, DEMO_FIRST_LAYOUT, audit=audit)
                finally:
                    audit.close()
            except ConsoleError as exc:  # the server goes on serving: visitors see the demo as it is
                self.say(shown(f"serve-console web: demo: {DEMO_FIRST_LAYOUT} not brought up: {exc}"))
                return
            self.say(shown(f"serve-console web: demo: {result.layout}: {headline(result)}"))
            return

    async def close(self) -> None:
        """Stop the units the demo started (none when it never looked), then close the hosts."""
        if self._at_start is not None:
            with contextlib.suppress(Exception):
                # Every unit that did not run at start, as the TUI's demo does: a start in flight has no
                # state yet, and a stop waits for it under the unit's lock.
                started = {(h.name, u) for h in self.hosts for s in h.config.services for u in s.all_units()}
                started -= self._at_start
                by_name = {h.name: h for h in self.hosts}
                for host_name, unit in sorted(started):
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(STOP_UNIT_S):
                            await by_name[host_name].services.stop(unit)
        for host in self.hosts:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await host.close()
