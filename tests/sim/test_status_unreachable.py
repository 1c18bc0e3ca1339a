"""`status` on a host that does not answer says so first (issue 30, B5): the state is unknown, and why, on
the service's first line, never `no unit running  health down` as if the host had said so."""

from __future__ import annotations

import os

from sim_cli import cli
from sim_fixtures import free_port


def test_status_of_an_unreachable_host_leads_with_unknown_and_why(tmp_path) -> None:
    ssh_port = free_port()  # nothing listens there: the SSH connection is refused at once
    (tmp_path / "hosts.toml").write_text(f"""
[hosts.gpu-node-1]
address = "127.0.0.1"
port = {ssh_port}
[hosts.gpu-node-1.services.llm]
engine = "sglang"
url = "http://127.0.0.1:{free_port()}"
template = "sglang@.service"
layouts = ["TP8"]
""")
    env = dict(os.environ, SERVE_CONSOLE_STATE_DIR=str(tmp_path / "state"))
    done = cli(tmp_path, env, "--config", "hosts.toml", "status", timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("gpu-node-1/llm [sglang]  layout ?  state unknown: the host does not answer ("), first
    assert f"127.0.0.1', {ssh_port}" in first or f"127.0.0.1:{ssh_port}" in first or "SSH connect" in first, first
    assert "no unit running" not in done.stdout, done.stdout
    assert "engine metrics: not read (the host does not answer)" in done.stdout
