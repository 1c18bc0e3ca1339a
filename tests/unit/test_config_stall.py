"""The stall keys of a service (docs/config.md): defaults, values, and one file:line error each."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import load_config
from console.errors import ConfigError

SERVICE = """[hosts.h.services.s]
engine = "sglang"
url = "http://127.0.0.1:30000"
template = "sglang@.service"
layouts = ["TP8"]
"""


def _service(tmp_path: Path, extra: str = ""):
    path = tmp_path / "hosts.toml"
    path.write_text(SERVICE + extra)
    return load_config(path).hosts[0].services[0]


def test_defaults(tmp_path: Path) -> None:
    s = _service(tmp_path)
    assert (s.stall_after_s, s.canary, s.canary_every_s, s.canary_timeout_s) == (20.0, True, 60.0, 20.0)


def test_values(tmp_path: Path) -> None:
    s = _service(tmp_path, "stall_after_s = 10\ncanary = false\ncanary_every_s = 30\ncanary_timeout_s = 5\n")
    assert (s.stall_after_s, s.canary, s.canary_every_s, s.canary_timeout_s) == (10.0, False, 30.0, 5.0)


@pytest.mark.parametrize(("line", "expected"), [
    ("stall_after_s = 0", "stall_after_s: expected a finite number > 0"),
    ('canary = "no"', "canary: expected true or false"),
    ("canary_timeout_s = -1", "canary_timeout_s: expected a finite number > 0"),
])
def test_bad_values_name_the_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _service(tmp_path, line + "\n")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'hosts.toml'}:6: ") and expected in message, message
