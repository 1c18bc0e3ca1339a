"""Fixtures for the UI tests: the real app on simulated hosts, each test in its own state dir and port."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from demo_config import demo_config_on_free_port
from waiting import settle

sys.path.insert(0, str(Path(__file__).parent))  # screen_text, fixed_host

# The journal pane shows systemd's lines with their journal time in local time, as journalctl does:
# snapshots are drawn in UTC wherever they run.
os.environ["TZ"] = "UTC"
time.tzset()

TIME_SCALE = "0.02"


@pytest.fixture(autouse=True)
def notifications_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every notification an app raised, kept for the test to read (`screen_text.notified`): Textual
    forgets a toast once its timeout passes, which a loaded machine can reach before the test reads it."""
    from textual.notifications import Notifications

    add = Notifications.add

    def keeping(self, notification):
        self.__dict__.setdefault("seen", []).append(notification)
        return add(self, notification)

    monkeypatch.setattr(Notifications, "add", keeping)


@pytest.fixture
def sim_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SERVE_CONSOLE_SIM_TIME_SCALE", TIME_SCALE)
    return tmp_path


@pytest.fixture
def demo_app(sim_env: Path):
    """A factory for the console on the simulated demo host (units stopped when the app exits)."""
    from console.factory import open_hosts
    from console.ops.audit import open_audit
    from console.ui.app import ConsoleApp

    audits = []

    def build(**kwargs):
        config = demo_config_on_free_port()
        audit = open_audit(sim_env)
        audits.append(audit)
        kwargs.setdefault("stop_started_units", True)
        return ConsoleApp(open_hosts(config, state_dir=sim_env), config=config, audit=audit, **kwargs)

    yield build
    for audit in audits:
        audit.close()


@pytest.fixture
def host_screen_ready():
    """`await host_screen_ready(pilot)`: until the app shows a host screen with its first view drawn."""
    from console.ui.screens.host import HostScreen

    async def ready(pilot) -> None:
        def shown() -> bool:
            screen = pilot.app.screen
            return isinstance(screen, HostScreen) and screen.last_view is not None

        await settle(pilot, shown, what="the host screen with its first view")

    return ready
