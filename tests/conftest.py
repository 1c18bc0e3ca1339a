"""Settings shared by every test tier.

Each test session (each pytest-xdist worker) gets its own state directory, so no test reads or writes
the user's real serve-console state (audit log, simulated units, ledgers), nor another worker's.

Side by side (`make test`: pytest-xdist, `--dist loadgroup`), tests that share a costly resource run on
one worker, by xdist group:
- "testbed": every test in tests/integration/ and any test using the real test hosts (the `testbed`
  fixtures): one worker boots the hosts, holds the session lock and tears them down;
- "terminal": the tests that run the packaged demo in a real terminal (tmux), whose demos would meet on
  the demo's ports;
- "fixture:NAME": the tests of one session-scoped fixture defined here (a real Prometheus, Alertmanager);
- the module's node id: the tests of a module with a module-scoped fixture (a simulated cluster, a
  browser), which would otherwise be set up once per worker.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTBED_FIXTURES = frozenset({"testbed", "clean_testbed"})
TESTBED_GROUP = "testbed"
TERMINAL_GROUP = "terminal"
TERMINAL_MODULES = frozenset({REPO / "tests" / "ui" / "test_tmux.py", REPO / "tests" / "ui" / "test_tmux_hangup.py"})


@pytest.fixture(autouse=True, scope="session")
def _isolated_state_dir() -> Iterator[None]:
    given = os.environ.get("SERVE_CONSOLE_STATE_DIR")
    worker_id = os.environ.get("PYTEST_XDIST_WORKER", "master")
    if given and worker_id == "master":
        yield
        return
    with tempfile.TemporaryDirectory(prefix=f"serve-console-test-{worker_id}-", dir=given) as tmp:
        os.environ["SERVE_CONSOLE_STATE_DIR"] = tmp
        try:
            yield
        finally:
            if given is None:
                os.environ.pop("SERVE_CONSOLE_STATE_DIR", None)
            else:
                os.environ["SERVE_CONSOLE_STATE_DIR"] = given


def xdist_group(item: pytest.Item) -> str | None:
    """The group an item must share a worker with, or None when it runs anywhere."""
    if (REPO / "tests" / "integration") in item.path.parents or TESTBED_FIXTURES & set(item.fixturenames):
        return TESTBED_GROUP
    if item.path in TERMINAL_MODULES:
        return TERMINAL_GROUP
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    group = None
    for name in sorted(item.fixturenames):
        for definition in info.name2fixturedefs.get(name, ()):
            if not definition.baseid or name == "_isolated_state_dir":
                continue  # pytest's and plugins' own session fixtures are cheap and per worker anyway
            if definition.scope == "session":
                return f"fixture:{name}"
            if definition.scope == "module":
                group = item.nodeid.split("::")[0]
    return group


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marker into the node id's @group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group(item)
        if group is not None and not any(m.name == "xdist_group" for m in item.iter_markers()):
            item.add_marker(pytest.mark.xdist_group(group))


_TESTBED_TIMINGS: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """The testbed worker's boot and teardown times (tests/integration/conftest.py), for the summary."""
    _TESTBED_TIMINGS.extend(getattr(node, "workeroutput", {}).get("testbed_timings", []))


def pytest_terminal_summary(terminalreporter) -> None:
    if _TESTBED_TIMINGS:
        terminalreporter.write_sep("-", "test hosts")
        terminalreporter.write_line("; ".join(_TESTBED_TIMINGS))
