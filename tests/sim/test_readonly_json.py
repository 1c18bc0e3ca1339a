"""`switch` and `stop` refused by read-only mode still print their one `--json` result line (outcome
`refused`), besides the one line on stderr, and start or stop nothing."""

from __future__ import annotations

import json

import pytest
from sim_cli import HOST, cli, sim_env  # noqa: F401 (sim_env is a fixture)
from sim_fixtures import engine_pids


@pytest.mark.parametrize("command", [["switch", "EP8"], ["stop"], ["restart"]], ids=["switch", "stop", "restart"])
@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_read_only_refusal_prints_its_json_result_line(sim_env, command, how):  # noqa: F811 (fixture)
    cwd, env = sim_env
    if how == "config":
        (cwd / "hosts.toml").write_text("[console]\nreadonly = true\n" + (cwd / "hosts.toml").read_text())
    args = [*command, "--json"] + (["--readonly"] if how == "flag" else [])
    run = cli(cwd, env, *args)
    assert run.returncode == 1
    (line,) = [json.loads(text) for text in run.stdout.splitlines()]
    assert line["event"] == "result" and line["outcome"] == "refused"
    assert line["host"] == HOST and line["service"] == "k26"
    assert line["reason"].startswith("read-only mode") and line["reason"] in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert engine_pids(cwd / "state") == []
