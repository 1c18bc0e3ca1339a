"""SIGTERM and SIGHUP end a command as Ctrl-C does: an explore leaves a ready layout running, and the demo
and the latency benchmark stop the simulated units they started (`timeout 4 serve-console demo` left its
supervisor and engine running in a temporary state dir nobody cleans)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from demo_cli import cli, demo_env, json_lines  # noqa: F401 (demo_env: the demo cluster on free ports)
from sim_cli import kill_leftovers, sim_pids, story_env
from sim_fixtures import REPO, engine_pids, wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_an_explore_ended_by_a_signal_mid_switch_leaves_a_ready_layout(demo_env, sig):  # noqa: F811 (fixture)
    cwd, env = demo_env
    assert cli(cwd, env, "switch", "EP8", "--json").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "console", "explore", "--host", "demo", "--layouts", "TP8,EP8",
                             "--json", "--concurrency", "1", "--num-prompts", "2", "--output-len", "8",
                             "--warmup", "0"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        for line in proc.stdout:  # EP8 is being stopped for TP8: the moment a kill left nothing running
            if json.loads(line).get("step") == "stop":
                break
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    final = json_lines(out)[-1]
    assert final["event"] == "explore" and final["interrupted"] and final["left_running"] == "EP8"
    status = json_lines(cli(cwd, env, "status", "--json").stdout)[0]
    assert status["health"]["status"] == "ready"
    assert [u["unit"] for u in status["units"] if u["active"] == "active"] == ["sglang-k26@ep8.service"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_switch_ended_by_a_signal_ends_as_ctrl_c_ends_it(demo_env, sig):  # noqa: F811 (fixture)
    cwd, env = demo_env
    proc = subprocess.Popen([sys.executable, "-m", "console", "switch", "EP8", "--host", "demo", "--json"],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the unit is asked to start: a plain switch leaves it to come up
            if json.loads(line).get("step") == "start":
                break
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    (switch,) = json_lines(cli(cwd, env, "history", "--json").stdout)
    assert switch["outcome"] == "interrupted" and switch["reason"] == "the switch was cancelled"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_the_demo_ended_by_a_signal_stops_its_units(tmp_path, sig):
    env = story_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "console", "demo", "--time-scale", "0.03"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert wait_until(lambda: engine_pids(tmp_path), timeout_s=60), "the demo's EP8 never started"
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        assert wait_until(lambda: not sim_pids(tmp_path), timeout_s=30), sim_pids(tmp_path)
        assert proc.returncode == 130
        assert list((tmp_path / "tmp").iterdir()) == []  # its state dir is gone too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(tmp_path)


def test_the_latency_benchmark_ended_by_sigterm_stops_its_units(tmp_path):
    env = story_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "bench/detect_latency.py", "--rounds", "1", "--time-scale", "0.03",
                             "--period", "1"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: engine_pids(tmp_path), timeout_s=60), "the benchmark's EP8 never started"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert wait_until(lambda: not sim_pids(tmp_path), timeout_s=30), sim_pids(tmp_path)
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_the_tui_demo_ended_by_a_signal_stops_the_units_it_started(tmp_path, sig):
    import fcntl
    import pty
    import select
    import struct
    import termios

    env = dict(story_env(tmp_path), TERM="xterm-256color", SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"),
               SERVE_CONSOLE_SIM_TIME_SCALE="0.03")  # fmt: skip
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "console", "--demo"], stdin=slave, stdout=slave, stderr=slave,
                            cwd=REPO, env=env, start_new_session=True)  # fmt: skip
    os.close(slave)

    def drained() -> bool:  # keeps the terminal's buffer from filling while we wait
        while select.select([master], [], [], 0)[0]:
            try:
                os.read(master, 65536)
            except OSError:
                break
        return False

    try:
        assert wait_until(lambda: drained() or engine_pids(tmp_path), timeout_s=60), "the demo's EP8 never started"
        proc.send_signal(sig)
        assert wait_until(lambda: drained() or proc.poll() is not None, timeout_s=60)
        assert wait_until(lambda: not sim_pids(tmp_path), timeout_s=30), sim_pids(tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        kill_leftovers(tmp_path)
