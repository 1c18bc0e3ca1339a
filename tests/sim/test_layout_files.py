"""Files the console writes on hosts (issue 10, items 7 and 8): names with a grammar, values escaped by
one function, env files edited in place, env_file paths confined at load."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_fixtures import EP8, TP8

from console.config import parse_config
from console.errors import ConfigError, HostError
from console.ops.switch.layout_files import DROP_IN_FILE, ENV_FILE_KIND, edit_env_file, systemd_quoted
from console.ops.switch.orchestrate import switch_layout
from console.sim.host.units import parse_drop_in, parse_env_file

VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=[chr(c) for c in range(32)] + ["\x7f"]))
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@given(VALUES, VALUES)
def test_drop_in_values_read_back_exactly(first, second):
    line = "Environment=" + " ".join(systemd_quoted(f"K{i}={v}", DROP_IN_FILE) for i, v in enumerate((first, second)))
    assert parse_drop_in(line) == {"K0": first, "K1": second}


@given(KEYS, VALUES)
def test_env_file_values_read_back_exactly(key, value):
    assert parse_env_file(f"{key}={systemd_quoted(value, ENV_FILE_KIND)}\n") == {key: value}


def test_quoting_escapes_what_systemd_reads_specially():
    assert systemd_quoted('a"b\\c%d$e', DROP_IN_FILE) == '"a\\"b\\\\c%%d$e"'
    assert systemd_quoted('a"b\\c%d$e`', ENV_FILE_KIND) == '"a\\"b\\\\c%d\\$e\\`"'
    with pytest.raises(ValueError, match="control character"):
        systemd_quoted("EP8\nLD_PRELOAD=/tmp/evil.so", ENV_FILE_KIND)


@given(st.lists(st.tuples(KEYS, VALUES), max_size=6), VALUES)
def test_env_file_edit_changes_only_the_consoles_keys(others, layout_args):
    mine = {"SERVE_CONSOLE_LAYOUT": "EP8", "SERVE_CONSOLE_LAYOUT_ARGS": layout_args}
    others = [(k, v) for k, v in others if k not in mine]
    before = "# kept\n" + "".join(f"{k}={systemd_quoted(v, ENV_FILE_KIND)}\n" for k, v in others)
    before += "SERVE_CONSOLE_LAYOUT=old\n"
    after = edit_env_file(before, mine)
    assert parse_env_file(after) == {**dict(others), **mine}
    assert after.startswith("# kept\n") and after.count("SERVE_CONSOLE_LAYOUT=") == 1


SERVICE = """
[hosts.h]
address = "h"
[hosts.h.services.s]
engine = "sglang"
url = "http://127.0.0.1:30000"
mapping = "{mapping}"
{extra}
[[hosts.h.services.s.layouts]]
name = {name}
tp = 8
"""


@pytest.mark.parametrize(
    "name", ['"EP8\\" \\"LD_PRELOAD=/tmp/evil.so"', "'bs\\'", '"50%"', '"$HOME"', '"\\u202eEP8"']
)
def test_a_layout_name_outside_the_grammar_is_refused_at_load_with_its_line(name):
    text = SERVICE.format(mapping="drop-in", extra='unit = "s.service"', name=name)
    with pytest.raises(ConfigError) as caught:
        parse_config(text.encode(), "hosts.toml", base_dir=__import__("pathlib").Path("."))
    message = str(caught.value)
    assert message.startswith("hosts.toml:") and "layout name" in message and caught.value.line


@pytest.mark.parametrize("path", ["/etc/../tmp/x.env", "/etc//x.env", "/etc/./x.env", "/etc/x/", "/proc/self/environ"])
def test_an_env_file_path_that_is_not_normalised_or_confined_is_refused_at_load(path):
    text = SERVICE.format(mapping="env-file", extra=f'unit = "s.service"\nenv_file = "{path}"', name='"TP8"')
    with pytest.raises(ConfigError) as caught:
        parse_config(text.encode(), "hosts.toml", base_dir=__import__("pathlib").Path("."))
    assert str(caught.value).startswith("hosts.toml:") and "env_file" in str(caught.value)


async def test_a_switch_edits_the_env_file_in_place_keeping_other_lines_and_mode(sim_hosts):
    host = sim_hosts(mapping="env-file", layout_specs=(EP8, TP8))
    path = host.config.services[0].env_file
    local = host.services.files.host_path(path)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text("# operator's file\nHF_TOKEN=hf_secret\nSERVE_CONSOLE_LAYOUT=stale\n")
    os.chmod(local, 0o600)
    result = await switch_layout(host, None, "TP8", timeout_s=60, rollback=False)
    assert result.outcome == "ready", result.reason
    text = local.read_text()
    assert text.startswith("# operator's file\nHF_TOKEN=hf_secret\n")
    assert parse_env_file(text)["SERVE_CONSOLE_LAYOUT"] == "TP8" and text.count("SERVE_CONSOLE_LAYOUT=") == 1
    assert stat.S_IMODE(local.stat().st_mode) == 0o600


async def test_the_simulated_host_never_writes_outside_its_files(sim_hosts, tmp_path):
    host = sim_hosts(mapping="env-file", layout_specs=(EP8, TP8))
    outside = tmp_path / "outside"
    outside.mkdir()
    (host.services.files_dir / "etc").mkdir(parents=True, exist_ok=True)
    (host.services.files_dir / "etc" / "link").symlink_to(outside)
    for path in ("/etc/link/x.env", "/../../outside/x.env"):
        with pytest.raises(HostError, match="outside"):
            await host.services.write_file(path, "X=1\n")
    assert list(outside.iterdir()) == []


async def test_the_systemd_writer_keeps_mode_and_other_lines_and_reads_a_missing_file_as_none(tmp_path):
    from console.hosts.local import LocalTransport
    from console.hosts.systemd.manager import SystemdManager

    manager = SystemdManager(LocalTransport())
    env_file = tmp_path / "etc" / "k26.env"
    assert await manager.read_file(str(env_file)) is None
    env_file.parent.mkdir()
    env_file.write_text("HF_TOKEN=hf_secret\nSERVE_CONSOLE_LAYOUT=old\n")
    os.chmod(env_file, 0o640)
    text = edit_env_file(await manager.read_file(str(env_file)), {"SERVE_CONSOLE_LAYOUT": "EP8"})
    await manager.write_file(str(env_file), text)
    assert env_file.read_text() == 'HF_TOKEN=hf_secret\nSERVE_CONSOLE_LAYOUT="EP8"\n'
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640
    assert sorted(p.name for p in env_file.parent.iterdir()) == ["k26.env"]  # no temporary file left
    fresh = tmp_path / "etc" / "new.env"
    await manager.write_file(str(fresh), "A=1\n")
    assert fresh.read_text() == "A=1\n"
