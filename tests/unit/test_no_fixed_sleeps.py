"""The suite waits on events, not the clock (issue 25): no fixed sleep or pause synchronises a test.

A sleep or pause with a literal delay anywhere in tests/ outside tests/waiting.py fails this test unless its
line carries `# deliberate:` with the reason (a stand-in engine or server that is slow on purpose). Waits go
through tests/waiting.py, whose deadlines SERVE_CONSOLE_TEST_SLOWDOWN scales.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "waiting.py"
# The count: grep -rnE '(time|asyncio)\.sleep\((0?\.)?[0-9]|pause\((0?\.)?[0-9]' tests --include='*.py'
FIXED = re.compile(r"(time|asyncio)\.sleep\((0?\.)?[0-9]|pause\((0?\.)?[0-9]")
MARKER = "# deliberate:"
#: The issue's target for the grep above (deliberate delays included), outside the helper.
MOST_DELIBERATE = 25


def fixed_sleeps() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == HELPER:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FIXED.search(line):
                found.append((str(path.relative_to(TESTS.parent)), number, line.strip()))
    return found


def test_no_fixed_sleep_synchronises_a_test() -> None:
    unmarked = [f"{path}:{number}: {line}" for path, number, line in fixed_sleeps() if MARKER not in line]
    assert not unmarked, (
        "a fixed sleep/pause synchronises a test; wait on the event with tests/waiting.py, or mark a delay "
        f"that is slow on purpose with {MARKER!r} and the reason:\n" + "\n".join(unmarked))


def test_deliberate_delays_stay_few() -> None:
    found = fixed_sleeps()
    assert len(found) <= MOST_DELIBERATE, "\n".join(f"{p}:{n}: {line}" for p, n, line in found)


def test_the_check_sees_each_form_of_a_fixed_sleep() -> None:
    # "|" stands for "(" so that this file's own source is no hit
    for call in ("time.sleep|1)", "await asyncio.sleep|0.5)", "await pilot.pause|.1)", "asyncio.sleep|0)"):
        line = call.replace("|", "(")
        assert FIXED.search(line), line
    for line in ("time.sleep(interval_s)", "await pilot.pause()", "wait_for(lambda: done, 'the reply')"):
        assert not FIXED.search(line), line
