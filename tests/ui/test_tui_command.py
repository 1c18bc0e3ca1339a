"""The `tui` subcommand's errors: one line, exit code 2, never a traceback, before any screen opens."""

from __future__ import annotations

from screen_text import notified
from waiting import settle

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


def _hold(port: int):
    """Listen on 127.0.0.1:port unless something already does (another demo holds it: just as busy)."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is not "held"
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()
        return None
    return sock


def _port(url: str) -> int:
    from urllib.parse import urlsplit

    return int(urlsplit(url).port or 0)


def test_demo_moves_off_a_busy_port(tmp_path, monkeypatch) -> None:
    import argparse

    from console.config import demo_config_path, load_config
    from console.sim.demo_cluster import PORT_LOCK_DIR_ENV, release_demo_ports
    from console.ui.tui_entry import tui_config

    monkeypatch.setenv(PORT_LOCK_DIR_ENV, str(tmp_path))  # apart from any demo running on this machine

    packaged = _port(load_config(demo_config_path()).hosts[0].services[0].url)
    holder = _hold(packaged)
    try:
        config, notes = tui_config(argparse.Namespace(demo=True, config=None))
    finally:
        if holder is not None:
            holder.close()
        release_demo_ports()
    moved = _port(config.hosts[0].services[0].url)
    assert moved != packaged
    (note,) = [n for n in notes if n.startswith("demo/kimi-k2.6:")]  # other demo hosts may move too
    assert f"port {packaged} is in use" in note and str(moved) in note


def test_user_config_is_used_as_written(tmp_path) -> None:
    import argparse

    from console.config import demo_config_path
    from console.ui.tui_entry import tui_config

    holder = _hold(0)
    assert holder is not None
    busy = holder.getsockname()[1]
    demo = demo_config_path()
    text = demo.read_text().replace("http://127.0.0.1:30000", f"http://127.0.0.1:{busy}")
    text = text.replace('model_config = "', f'model_config = "{demo.parent}/')
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(text)
    try:
        config, notes = tui_config(argparse.Namespace(demo=False, config=str(hosts)))
    finally:
        holder.close()
    assert notes == [] and config.hosts[0].services[0].url == f"http://127.0.0.1:{busy}"


async def test_notices_show_as_notifications() -> None:
    from fixed_host import fixed_app

    app = fixed_app({"demo": "ep8"}, notices=["demo/kimi-k2.6: port 30000 is in use here; the demo serves on 41234"])
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: any("the demo serves on 41234" in n.message for n in notified(app)))


def test_a_users_theme_overrides_and_extends_the_shipped_ones(tmp_path) -> None:
    from console.ui.themes import CHECKOUT_THEMES, load_themes

    (tmp_path / "dark.toml").write_text('primary = "#ff0000"\nbackground = "#101010"\n')
    (tmp_path / "sepia.toml").write_text('primary = "#704214"\ndark = false\n')
    themes = load_themes(CHECKOUT_THEMES, tmp_path)
    assert themes["dark"].primary == "#ff0000"
    assert {"sepia", "light", "high-contrast"} <= set(themes)


def _console(stdin, stdout, stderr):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "console", "--demo"], stdin=stdin, stdout=stdout,
                          stderr=stderr, timeout=60)


def test_without_a_terminal_the_tui_exits_2_pointing_to_status_and_tail() -> None:
    import subprocess

    proc = _console(subprocess.DEVNULL, subprocess.PIPE, subprocess.PIPE)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b""
    assert err.count("\n") == 1 and "stdin, stdout and stderr are not one" in err
    assert "serve-console status" in err and "serve-console tail" in err


def test_stdout_piped_from_a_terminal_exits_at_once() -> None:
    """`serve-console --demo | head`: keys and drawing have a terminal, stdout does not; no hang."""
    import os
    import pty
    import subprocess

    master, slave = pty.openpty()
    try:
        proc = _console(slave, subprocess.PIPE, slave)
        os.close(slave)
        slave = -1
        err = os.read(master, 4096).decode()
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert proc.returncode == 2 and proc.stdout == b""
    assert "and stdout is not one" in err and "serve-console status" in err
