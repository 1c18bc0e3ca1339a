"""Secrets in a list or a tuple are masked too: vLLM prints `--api-key` as `'api_key': ['sk-...']`
(issue 18, B11)."""

from __future__ import annotations

import json

import pytest
from sim_cli import UNIT, cli, journal_dir, sim_env  # noqa: F401 - the fixture is used by name

from console.domain.redact import redact
from console.sim.systemd.journal import append_entry

# vLLM's start line as it prints it (api_key is a list: `--api-key` may be given more than once).
VLLM_ARGS = ("(APIServer pid=4242) INFO 05-04 10:00:01 [utils.py:233] non-default args: "
             "{'model': 'Qwen/Qwen3-8B', 'api_key': ['sk-live-123', 'sk-live-456'], 'port': 8000}")
SGLANG_TUPLE = "server_args=ServerArgs(model_path='m', api_key=('sk-live-789',), port=30000)"


@pytest.mark.parametrize("line, masked", [
    (VLLM_ARGS, "'api_key': ['***', '***'], 'port': 8000}"),
    (SGLANG_TUPLE, "api_key=('***',), port=30000)"),
    ('{"api_key": ["sk-live-1"], "hf_token": ("hf-2", "hf-3")}', '{"api_key": ["***"], "hf_token": ("***", "***")}'),
    ("OPENAI_API_KEY=[sk-live-1, sk-live-2]", "OPENAI_API_KEY=[***, ***]"),
])
def test_every_item_of_a_secret_list_or_tuple_is_masked(line: str, masked: str) -> None:
    out = redact(line)
    assert out.endswith(masked), out
    assert "sk-live" not in out and "hf-2" not in out
    assert redact(out) == out  # masking twice changes nothing


def test_tail_and_tail_json_mask_vllms_list_form(sim_env):  # noqa: F811
    tmp_path, env = sim_env
    unit_dir = journal_dir(tmp_path)
    unit_dir.mkdir(parents=True, exist_ok=True)
    for message in (VLLM_ARGS, SGLANG_TUPLE):
        append_entry(unit_dir / "journal.jsonl", message, pid=4242)
    run = cli(tmp_path, env, "tail", "--unit", UNIT, "-n", "5")
    assert run.returncode == 0, run.stderr
    assert "sk-live" not in run.stdout and "'api_key': ['***', '***']" in run.stdout
    as_json = cli(tmp_path, env, "tail", "--unit", UNIT, "-n", "5", "--json")
    messages = [json.loads(line)["message"] for line in as_json.stdout.splitlines()]
    assert messages == [redact(VLLM_ARGS), redact(SGLANG_TUPLE)] and "sk-live" not in as_json.stdout
