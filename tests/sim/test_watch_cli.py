"""`serve-console watch` and `serve-console alerts` as commands: a real process, a simulated host, its state dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from sim_cli import cli, sim_env  # noqa: F401 (fixture)

from console.domain.alerts import ENGINE_FAILED


def test_watch_raises_a_failed_start_records_it_and_stops_cleanly_on_sigterm(sim_env):  # noqa: F811
    cwd, env = sim_env
    toml = (cwd / "hosts.toml").read_text().replace('layouts = ["TP8", "EP8"]', 'layouts = ["TP8", "EP8", "TP4 EP2"]')
    (cwd / "hosts.toml").write_text(toml + "\n[watch]\ninterval_s = 0.3\n")
    env = dict(env, SERVE_CONSOLE_WATCH_WEBHOOK_URL="")
    watch = subprocess.Popen([sys.executable, "-m", "console", "watch", "--json"], cwd=cwd, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        start = cli(cwd, env, "switch", "TP4 EP2", "--force", "--no-rollback", "--json")  # dies of its CUDA OOM
        assert start.returncode == 1, start.stderr
        line = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ENGINE_FAILED not in line:
            line = watch.stdout.readline()
        event = json.loads(line)
        assert event["transition"] == "firing" and event["labels"]["layout"] == "TP4 EP2"
        assert event["annotations"]["class"] == "cuda_oom"
    finally:
        watch.send_signal(signal.SIGTERM)
        _out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "FIRING ServeEngineFailed sim1/k26 sglang-k26@tp4ep2.service: TP4 EP2 failed: CUDA OOM" in err
    assert "Traceback" not in err and "stopped; 0 deliveries stay queued" in err
    listed = cli(cwd, env, "alerts")
    assert listed.returncode == 0 and listed.stdout.startswith("FIRING ")
    assert "ServeEngineFailed [critical] sim1/k26 sglang-k26@tp4ep2.service: TP4 EP2 failed: CUDA OOM" in listed.stdout
    as_json = [json.loads(x) for x in cli(cwd, env, "alerts", "--json").stdout.splitlines()]
    assert [(a["status"], a["labels"]["alertname"]) for a in as_json] == [("firing", ENGINE_FAILED)]
    assert cli(cwd, env, "alerts", "--host", "other").stdout.startswith("no alerts recorded")


def test_watch_refuses_in_one_line_what_it_cannot_use(sim_env):  # noqa: F811
    cwd, env = sim_env
    unknown = cli(cwd, env, "watch", "--host", "nope")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "no host 'nope'" in unknown.stderr
    bad_hook = cli(cwd, dict(env, SERVE_CONSOLE_WATCH_WEBHOOK_URL="ftp://x"), "watch")
    assert bad_hook.returncode == 2 and "SERVE_CONSOLE_WATCH_WEBHOOK_URL: expected an http" in bad_hook.stderr
    good = (cwd / "hosts.toml").read_text()
    (cwd / "hosts.toml").write_text(good + '\n[watch]\nalertmanager = "http://[::1"\n')
    bad_url = cli(cwd, env, "watch")
    (cwd / "hosts.toml").write_text(good)
    assert bad_url.returncode == 2 and "hosts.toml:" in bad_url.stderr and "watch.alertmanager" in bad_url.stderr
    assert "Traceback" not in unknown.stderr + bad_hook.stderr + bad_url.stderr


def test_ctrl_c_stops_watch_cleanly_with_exit_0(sim_env):  # noqa: F811
    cwd, env = sim_env
    toml = (cwd / "hosts.toml").read_text()
    (cwd / "hosts.toml").write_text(toml + "\n[watch]\ninterval_s = 0.3\n")
    watch = subprocess.Popen([sys.executable, "-m", "console", "watch"], cwd=cwd, env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "watching" not in line and watch.poll() is None:
            line = watch.stderr.readline()
        assert "watching" in line
        assert cli(cwd, env, "switch", "EP8", "--json").returncode == 0  # its journal followed, its probe read
    finally:
        os.killpg(watch.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
        _out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "Traceback" not in err and "stopped;" in err
