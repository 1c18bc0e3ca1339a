"""`probe`, `results` and `explore` as scripts run them, on the packaged demo cluster (fast start-up)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import demo_cli
from demo_cli import HOST, cli, json_lines
from waiting import wait_for

demo_env = demo_cli.demo_env  # the fixture, used by name


def test_read_only_refuses_probe_and_explore(demo_env):
    cwd, env = demo_env
    for args in (["probe", "--readonly"], ["explore", "--layouts", "EP8", "--readonly"]):
        done = cli(cwd, env, *args)
        assert done.returncode == 1, done.stderr
        assert "read-only" in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    text = (cwd / "hosts.toml").read_text()
    (cwd / "ro.toml").write_text(text + "\n[console]\nreadonly = true\n")
    argv = [sys.executable, "-m", "console", "--config", "ro.toml", "probe", *HOST]
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "read-only" in done.stderr


def test_usage_errors_are_one_line_and_exit_2(demo_env):
    cwd, env = demo_env
    for args, said in ((["probe", "--concurrency", "0"], "--concurrency"),
                       (["probe", "--dataset", "missing.json"], "missing.json"),
                       (["probe", "--request-rate", "fast"], "--request-rate"),
                       (["explore"], "--layouts"),
                       (["explore", "--layouts", "EP8,NOPE"], "NOPE"),
                       (["explore", "--layouts", "EP8", "--pick", "best"], "--pick"),
                       (["results", "--pick", "ttft-slo:-1"], "--pick")):
        done = cli(cwd, env, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_probe_needs_a_running_layout(demo_env):
    cwd, env = demo_env
    done = cli(cwd, env, "probe")
    assert done.returncode == 1 and "no layout is running" in done.stderr


def test_probe_json_lines_output_file_and_results(demo_env):
    cwd, env = demo_env
    assert cli(cwd, env, "switch", "EP8").returncode == 0
    done = cli(cwd, env, "probe", "--json", "--concurrency", "1,2", "--num-prompts", "2", "--output-len", "8",
               "--output-file", "probe.jsonl")
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    assert [(x["event"], x["concurrency"], x["layout"]) for x in lines] == [("probe", 1, "EP8"), ("probe", 2, "EP8")]
    assert all(x["completed"] == 2 and x["failed"] == 0 and x["total_output_tokens"] == 16 for x in lines)
    assert json_lines((cwd / "probe.jsonl").read_text()) == lines
    human = cli(cwd, env, "probe", "--concurrency", "1", "--num-prompts", "1", "--output-len", "4")
    assert human.returncode == 0 and "============ Serving Benchmark Result ============" in human.stdout
    assert "Max request concurrency:                 1" in human.stdout and "P99 TTFT (ms):" in human.stdout
    (res,) = json_lines(cli(cwd, env, "results", "--json").stdout)
    assert res["best"] == "EP8" and res["layouts"][0]["layout"] == "EP8"
    assert set(res["layouts"][0]["aggregate_tokens_per_s"]) == {"1", "2"}
    table = cli(cwd, env, "results").stdout
    assert "*  EP8" in table and "Pareto frontier" in table
    rows = cli(cwd, env, "results", "--csv").stdout.splitlines()
    assert rows[0].startswith("host,service,layout,best") and len(rows) == 3


def test_ctrl_c_mid_explore_leaves_one_ready_engine(demo_env):
    cwd, env = demo_env
    proc = subprocess.Popen([sys.executable, "-m", "console", "explore", *HOST, "--layouts", "EP8,TP8", "--json",
                             "--concurrency", "1", "--num-prompts", "40", "--output-len", "40", "--warmup", "0"],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in proc.stdout:  # the EP8 switch's verdict, then into its probe
            seen.append(json.loads(line))
            if seen[-1].get("event") == "result":
                break
        assert seen[-1]["outcome"] == "ready", seen[-1]
        journals = list((cwd / "state").rglob("sglang-k26@ep8.service/journal.jsonl"))
        assert len(journals) == 1, journals

        def decodes() -> int:
            return journals[0].read_text().count("Decode batch.")

        before = decodes()
        wait_for(lambda: decodes() > before, "EP8 to decode the probe's first request")  # into its probe
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    final = json_lines(out)[-1]
    assert final["event"] == "explore" and final["interrupted"] and final["left_running"] == "EP8"
    status = json_lines(cli(cwd, env, "status", "--json").stdout)[0]
    assert status["active_layout"] == "EP8" and status["health"]["status"] == "ready"
    assert [u["unit"] for u in status["units"] if u["active"] == "active"] == ["sglang-k26@ep8.service"]
