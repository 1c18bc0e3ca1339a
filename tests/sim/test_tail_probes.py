"""Headless `tail` hides the console's own probe requests (its /health and /metrics polls in the engine's
access log), as the TUI folds them; `--probes` shows them; anyone else's requests always show."""

from __future__ import annotations

import json
import re
import urllib.request

from sim_cli import cli, sim_env  # noqa: F401 (sim_env is a fixture)

CONSOLE_PROBE = re.compile(r'"GET /health HTTP/1\.1" 200 OK "serve-console/[^"]* \(probe\)"')


def test_tail_hides_the_consoles_own_probes_unless_asked(sim_env):  # noqa: F811 (fixture)
    cwd, env = sim_env
    assert cli(cwd, env, "switch", "EP8").returncode == 0
    url = re.search(r'url = "([^"]+)"', (cwd / "hosts.toml").read_text())[1]
    for _ in range(3):
        assert cli(cwd, env, "status").returncode == 0  # the console's own /health probes
    request = urllib.request.Request(f"{url}/health", headers={"User-Agent": "curl/8.5.0"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # someone else's: always shown
        assert answer.status == 200

    plain = cli(cwd, env, "tail", "-n", "30")
    assert plain.returncode == 0, plain.stderr
    assert not CONSOLE_PROBE.search(plain.stdout)
    assert '"GET /health HTTP/1.1" 200 OK "curl/8.5.0"' in plain.stdout
    assert "The server is fired up and ready to roll!" in plain.stdout  # the lines that matter are kept

    shown = cli(cwd, env, "tail", "-n", "30", "--probes")
    assert CONSOLE_PROBE.search(shown.stdout)

    as_json = [json.loads(line)["message"] for line in cli(cwd, env, "tail", "-n", "30", "--json").stdout.splitlines()]
    assert as_json and not any(CONSOLE_PROBE.search(m) for m in as_json)
    with_probes = cli(cwd, env, "tail", "-n", "30", "--json", "--probes").stdout.splitlines()
    assert any(CONSOLE_PROBE.search(json.loads(line)["message"]) for line in with_probes)


def test_tail_follow_hides_the_consoles_new_probes_too(sim_env):  # noqa: F811 (fixture)
    import subprocess
    import sys
    import threading

    cwd, env = sim_env
    assert cli(cwd, env, "switch", "EP8").returncode == 0
    url = re.search(r'url = "([^"]+)"', (cwd / "hosts.toml").read_text())[1]
    follow = subprocess.Popen([sys.executable, "-m", "console", "tail", "-f", "-n", "3"], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = threading.Timer(60, follow.kill)  # a line that never comes ends the read, not the test run
    deadline.start()
    try:
        assert cli(cwd, env, "status").returncode == 0  # a console probe, then someone else's request
        request = urllib.request.Request(f"{url}/health", headers={"User-Agent": "curl/8.5.0"})
        with urllib.request.urlopen(request, timeout=10):
            pass
        seen = []
        for line in follow.stdout:
            seen.append(line)
            if '"curl/8.5.0"' in line:
                break
        assert seen and '"curl/8.5.0"' in seen[-1] and not any(CONSOLE_PROBE.search(line) for line in seen)
    finally:
        deadline.cancel()
        follow.terminate()
        follow.wait(timeout=30)
