"""The command's entry points: both spellings run, usage errors are one line with exit 2."""

from __future__ import annotations

import subprocess
import sys

from console.cli import COMMANDS, _insert_default


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=60
    )


def test_python_dash_m_lists_every_subcommand() -> None:
    proc = _run("--help")
    assert proc.returncode == 0
    for name in COMMANDS:
        assert name in proc.stdout


def test_unknown_option_is_one_line_and_exit_2() -> None:
    proc = _run("fit", "--no-such-option")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("serve-console:")
    assert "Traceback" not in proc.stderr


def test_no_subcommand_means_the_tui_after_global_options() -> None:
    assert _insert_default([]) == ["tui"]
    assert _insert_default(["--demo"]) == ["tui", "--demo"]
    assert _insert_default(["--config", "x.toml", "--readonly"]) == ["--config", "x.toml", "tui", "--readonly"]
    assert _insert_default(["--config=x.toml"]) == ["--config=x.toml", "tui"]
