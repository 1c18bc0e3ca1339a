"""The stage the demo's headless stories share: the demo hosts opened, the first switch, the units stopped."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.domain.safe_text import shown


@dataclass(slots=True)
class Stage:
    """What a story acts with: the demo's hosts by name, the audit, its voice and the switch printer."""

    hosts: dict[str, Any]
    audit: Any
    say: Callable[[str], None]
    printer: Callable[[object], None]

    async def first_switch(self, host, service, layout: str) -> bool:
        """Step 1 of every story: the service switched to `layout`; False (said) when it did not come up."""
        from console.ops.switch import READY, switch_layout

        result = await switch_layout(host, service, layout, audit=self.audit, on_event=self.printer)
        if result.outcome != READY:
            self.say(f"{layout} did not come up; the story cannot go on.")
            return False
        self.say("")
        return True


@contextlib.asynccontextmanager
async def stage(config, state_root: Path, as_json: bool, *, head: str, service: str) -> AsyncIterator[Stage]:
    """The demo's hosts, opened to stop their units on close: a story leaves no engine behind."""
    from console.commands.switch_output import HumanPrinter, JsonPrinter
    from console.factory import open_hosts
    from console.ops.audit import AuditLog

    hosts = {h.name: h for h in open_hosts(config, state_dir=state_root, stop_units_on_close=True)}
    audit = AuditLog(state_root / "audit.sqlite3")
    say = (lambda _t: None) if as_json else (lambda text: print(shown(text), flush=True))
    printer = JsonPrinter() if as_json else HumanPrinter(head, service)
    try:
        yield Stage(hosts=hosts, audit=audit, say=say, printer=printer)
    finally:
        say("")
        say("Stopping the demo's units...")
        audit.close()
        for host in hosts.values():
            await host.close()
