"""The `tui` subcommand's errors: one line, exit code 2, never a traceback, before any screen opens."""

from __future__ import annotations

from console.cli import main


def test_missing_config_is_one_line(capsys) -> None:
    assert main(["--config", "/nonexistent/hosts.toml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("serve-console: /nonexistent/hosts.toml") and "\n" not in err


def test_unknown_theme_is_refused(capsys) -> None:
    assert main(["--demo", "--theme", "sepia"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown theme 'sepia'" in err and "dark" in err and "high-contrast" in err and "light" in err


def test_theme_files_load_by_name() -> None:
    from console.ui.themes import load_themes

    themes = load_themes()
    assert {"dark", "light", "high-contrast"} <= set(themes)
    assert themes["light"].dark is False and themes["high-contrast"].background == "#000000"


def test_broken_theme_file_names_the_file(tmp_path) -> None:
    import pytest

    from console.errors import ConfigError
    from console.ui.themes import load_themes

    (tmp_path / "bad.toml").write_text("primary = [unclosed\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        load_themes(tmp_path)
