"""Property tests: no broken hosts.toml ever escapes as anything but a one-line ConfigError."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import tomli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.config import ConsoleConfig, demo_config_path, load_config, parse_config
from console.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "configs"
VALID_FILES = [FIXTURES / "all_mappings.toml", FIXTURES / "minimal.toml", demo_config_path()]
LABEL = "cfg/hosts.toml"

# 2 shared cores: modest example counts (CONFIG_EXAMPLES=3000 for a deeper local run), no deadline (the loader reads model configs from disk).
SETTINGS = settings(max_examples=int(os.environ.get("CONFIG_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_loads_or_one_line_error(data: bytes, base_dir: Path) -> ConsoleConfig | None:
    """The loader's whole contract on bad input: a config, or one ConfigError line naming the file."""
    try:
        return parse_config(data, LABEL, base_dir=base_dir)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, message
        assert re.match(rf"{re.escape(LABEL)}(:\d+)?: \S", message), message
        if exc.line is not None:
            assert 1 <= exc.line <= data.count(b"\n") + 1, message
        return None


# --- mutated valid files ---------------------------------------------------------------------------

_snippets = st.sampled_from([
    "", "=", "[", "]", "[[", '"', "'''", '"""', "#", "\n", "\\", ".", ",", "{", "}", " = 1", " = true",
    ' = "x"', " = []", " = {}", " = nan", " = -1", " = 99999999999999999999", "[hosts.x]", "\x00", "\u00e9",
    "\ufeff", "\r", "\t", "@", "-", "services", "layouts", "unit", "tp", "=\n", 'mapping = "drop-in"',
])


@st.composite
def mutated_file(draw: st.DrawFn) -> tuple[bytes, Path]:
    source = draw(st.sampled_from(VALID_FILES))
    lines = source.read_text().splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "duplicate", "insert", "replace", "truncate", "swap"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "insert":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(_snippets) + line[at:]
        elif kind == "replace":
            at = draw(st.integers(0, max(0, len(line) - 1)))
            lines[i] = line[:at] + draw(st.characters(codec="utf-8")) + line[at + 1 :]
        elif kind == "truncate":
            lines[i] = line[: draw(st.integers(0, len(line)))]
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines).encode("utf-8", "surrogatepass"), source.parent


@SETTINGS
@given(mutated_file())
def test_mutated_valid_files(case: tuple[bytes, Path]) -> None:
    assert_loads_or_one_line_error(*case)


# --- random bytes ----------------------------------------------------------------------------------

@SETTINGS
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    assert_loads_or_one_line_error(data, FIXTURES)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_through_a_real_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hosts.toml"
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f"{path}")


# --- random TOML documents shaped like configs (wrong types, unknown keys, bad values) -------------

_KEYS = ["console", "hosts", "transport", "address", "user", "port", "identity", "gpus", "gpu_count",
         "gpu_mem_gib", "time_scale", "sim", "services", "engine", "url", "mapping", "unit", "template",
         "env_file", "env_var", "model_config", "mem_fraction", "health_via", "sudo", "layouts", "name",
         "tp", "ep", "pp", "dp", "dp_attention", "args", "keys", "theme", "line_cap", "readonly", "demo", "s"]
_STRINGS = ["sglang", "vllm", "openai", "ssh", "local", "sim", "template", "env-file", "drop-in",
            "unit-per-layout", "TP8", "EP8", "TP4 EP2", "--tp-size 4 --ep-size 2", "x@.service", "x.service",
            "http://127.0.0.1:30000", "http://h:0", "/etc/x.env", "rel.env", "nvml", "nvidia-smi",
            "../../../console/sim/models/moonshotai--Kimi-K2.6.json", "", "-x", "a\nb", "\x7f"]
_scalars = st.one_of(
    st.sampled_from(_STRINGS), st.text(max_size=12), st.integers(-(2**63), 2**63 - 1), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner, max_size=5),
    ),
    max_leaves=25,
)
_names = st.sampled_from(["h", "demo", "kimi-k2.6", "h2", "a b"])
_field_values = st.one_of(st.sampled_from(_STRINGS), _scalars, st.lists(st.sampled_from(_STRINGS), max_size=3), _values)
_services = st.dictionaries(_names, st.dictionaries(st.sampled_from(_KEYS[13:]), _field_values, max_size=8),
                            max_size=2)
_hosts = st.dictionaries(
    _names,
    st.builds(lambda keys, services: {**keys, "services": services},
              st.dictionaries(st.sampled_from(_KEYS[2:13]), _field_values, max_size=5), _services),
    max_size=2,
)
_documents = st.fixed_dictionaries(
    {"hosts": _hosts | _values},
    optional={"console": st.dictionaries(st.sampled_from(_KEYS), _field_values, max_size=4)},
)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _value(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):  # a TOML basic string: no surrogate-pair escapes, DEL escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"


def dump_toml(document: dict, path: tuple[str, ...] = ()) -> list[str]:
    """A small TOML writer: tables as [headers] (so the line locator is exercised), the rest inline."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in document.items() if not isinstance(v, dict)]
    for k, v in document.items():
        if isinstance(v, dict):
            lines.append("[" + ".".join(_key(p) for p in (*path, k)) + "]")
            lines.extend(dump_toml(v, (*path, k)))
    return lines


@SETTINGS
@given(_documents)
def test_random_config_shaped_documents(document: dict) -> None:
    assert_loads_or_one_line_error("\n".join(dump_toml(document)).encode(), FIXTURES)


def test_the_toml_writer_round_trips() -> None:
    document = {"hosts": {"a b": {"port": 1, "x": [1.5, {"k": "v"}], "sim": {"t": True}}}}
    assert tomli.loads("\n".join(dump_toml(document))) == document


# --- one value of a valid file replaced by a value of another type ---------------------------------

def _leaf_paths(node: object, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaf_paths(v, (*path, k))] + ([path] if path else [])
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaf_paths(v, (*path, i))] + [path]
    return [path]


@st.composite
def retyped_file(draw: st.DrawFn) -> tuple[bytes, Path]:
    source = draw(st.sampled_from(VALID_FILES))
    document = tomli.loads(source.read_text())
    path = draw(st.sampled_from(_leaf_paths(document)))
    node = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = draw(_values)
    return "\n".join(dump_toml(document)).encode(), source.parent


@SETTINGS
@given(retyped_file())
def test_valid_files_with_one_value_retyped(case: tuple[bytes, Path]) -> None:
    assert_loads_or_one_line_error(*case)


# --- the CLI side: one line on stderr, exit code 2 -------------------------------------------------

@pytest.mark.parametrize("command", [["status"], ["tail"], ["switch", "EP8"], []], ids=["status", "tail", "switch", "tui"])
def test_cli_prints_one_line_and_exits_2(tmp_path: Path, command: list[str]) -> None:
    broken = tmp_path / "hosts.toml"
    broken.write_text('[hosts.h]\ntransport = "telnet"\n')
    result = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(broken), *command],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{broken}:2: hosts.h.transport: expected one of" in result.stderr


def test_cli_without_any_config_says_where_it_looked(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "console", "status"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert "hosts.toml: no config found" in result.stderr and str(tmp_path / "xdg") in result.stderr
