"""The command's entry points: both spellings run, usage errors are one line with exit 2."""

from __future__ import annotations

import subprocess
import sys

from console.cli import COMMANDS, build_parser, with_default_command


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


def test_no_subcommand_means_the_tui_whatever_the_options() -> None:
    assert with_default_command([]) == ["tui"]
    assert with_default_command(["--demo"]) == ["tui", "--demo"]
    assert with_default_command(["--config", "x.toml", "--readonly"]) == ["tui", "--config", "x.toml", "--readonly"]
    assert with_default_command(["--config=x.toml"]) == ["tui", "--config=x.toml"]
    # a config file that happens to be called `status` is not the subcommand
    assert with_default_command(["--config", "status"]) == ["tui", "--config", "status"]
    assert with_default_command(["--config", "x.toml", "status"]) == ["--config", "x.toml", "status"]


def test_global_options_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    for argv in (
        ["--config", "x.toml", "--readonly", "status"],
        ["status", "--config", "x.toml", "--readonly"],
        ["--readonly", "status", "--config=x.toml"],
        ["tui", "--readonly", "--config", "x.toml"],
        ["--config", "x.toml", "--readonly", "tui"],
    ):
        args = parser.parse_args(argv)
        assert (args.config, args.readonly) == ("x.toml", True), argv
    plain = parser.parse_args(["switch", "EP8"])
    assert (plain.config, plain.readonly) == (None, False)


def test_config_after_the_subcommand_is_used() -> None:
    proc = _run("status", "--config", "/nonexistent/hosts.toml")
    assert proc.returncode == 2
    assert "/nonexistent/hosts.toml" in proc.stderr and proc.stderr.count("\n") == 1
