"""Settings shared by every test tier.

Each test session gets its own state directory, so no test reads or writes the user's real
serve-console state (audit log, simulated units, ledgers).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_state_dir() -> Iterator[None]:
    if "SERVE_CONSOLE_STATE_DIR" in os.environ:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="serve-console-test-") as tmp:
        os.environ["SERVE_CONSOLE_STATE_DIR"] = tmp
        try:
            yield
        finally:
            os.environ.pop("SERVE_CONSOLE_STATE_DIR", None)
