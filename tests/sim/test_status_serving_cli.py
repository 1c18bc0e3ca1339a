"""`status` and `status --json` carry whether each service is still serving (issue 26): the `serving` object
exactly as docs/cli.md gives it, a `serving:` line in plain status, and the state dir's memory, so a
status run after another compares with it (the simulated SGLang, ready and idle, is idle)."""

from __future__ import annotations

import json

from sim_cli import cli, sim_env  # noqa: F401 (sim_env is a fixture)


def test_status_says_whether_each_service_is_still_serving(sim_env):  # noqa: F811 (fixture)
    cwd, env = sim_env
    assert cli(cwd, env, "switch", "EP8").returncode == 0
    first = json.loads(cli(cwd, env, "status", "--json").stdout.splitlines()[0])
    serving = first["serving"]
    assert set(serving) == {"state", "since", "last_progress_at", "pending", "reason", "ranks", "evidence"}
    assert set(serving["pending"]) == {"running", "waiting", "ours"} and serving["evidence"] is None
    assert serving["state"] in ("idle", "serving")
    memory = json.loads((cwd / "state" / "progress.json").read_text())
    assert list(memory) == ["sim1/k26"] and memory["sim1/k26"]["engine_key"].startswith("sglang-k26@ep8.service:")
    second = json.loads(cli(cwd, env, "status", "--json").stdout.splitlines()[0])
    assert second["serving"]["state"] == "idle", second["serving"]  # compared with the first: nothing moved
    plain = cli(cwd, env, "status")
    assert plain.returncode == 0
    assert any(line.strip().startswith("serving: IDLE, nothing pending") for line in plain.stdout.splitlines()), \
        plain.stdout
