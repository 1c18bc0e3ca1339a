"""Where the test hosts keep their state, and the session lock that keeps them up while in use.

A pytest session and `bench/fanout.py` each hold `session.lock` while they use the hosts, so neither
(nor `testbed.sh up/down` from a shell) tears the hosts down under the other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from waiting import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[1]


def testbed_dir() -> Path:
    """Where testbed.sh keeps its state (env SERVE_CONSOLE_TESTBED_DIR, default REPO/.testbed)."""
    return Path(os.environ.get("SERVE_CONSOLE_TESTBED_DIR", REPO / ".testbed"))


@contextlib.contextmanager
def hold_session_lock(timeout_s: float, on_timeout: Callable[[str], None]) -> Iterator[None]:
    """Hold `session.lock`, waiting up to `timeout_s` for another holder.

    Args:
        timeout_s: How long to wait for another session to finish.
        on_timeout: Called with a one-line reason when the wait runs out; it must raise or exit.
    """
    state = testbed_dir()
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "session.lock", "w") as lock:

        def taken() -> bool:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        try:
            wait_for(taken, f"{state / 'session.lock'}, held by another session", timeout_s=timeout_s, interval_s=1)
        except WaitTimeout:
            on_timeout(f"another session held {state / 'session.lock'} for {timeout_s:.0f} s")
            raise AssertionError("on_timeout must not return") from None
        yield
