"""Central quoting, unit-name validation and sudo handling."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.values import CommandResult
from console.errors import HostError, UsageError
from console.hosts.argv import (
    LineSplitter,
    UnitNameError,
    quote_argv,
    raise_for_result,
    sudo_wrap,
    validate_unit_name,
    wants_password,
)


@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=20), min_size=1, max_size=6)
)
def test_quoting_round_trips_any_argv(argv):
    assert shlex.split(quote_argv(argv)) == argv


def test_quoting_neutralises_shell_syntax():
    cmd = quote_argv(["echo", "$(reboot)", "; rm -rf /", "`id`"])
    assert cmd == "echo '$(reboot)' '; rm -rf /' '`id`'"


@pytest.mark.parametrize("bad", [[], "ls -l", ["ls", "a\0b"], ["ls", 3]])
def test_bad_argv_is_refused(bad):
    with pytest.raises(UsageError):
        quote_argv(bad)


@pytest.mark.parametrize(
    "name",
    [
        "sglang-k26-ep8.service",
        "sglang-k26@tp4ep2.service",
        "sglang-k26@.service",
        "a:b_c.d\\x2d.timer",
        "noisy.service",
    ],
)
def test_valid_unit_names_pass(name):
    assert validate_unit_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "sglang",
        "-x.service",
        "a b.service",
        "a;reboot.service",
        "x.serv1ce",
        "x.bogus",
        "a@b@c.service",
        "$(id).service",
        "a\n.service",
        "u" * 300 + ".service",
    ],
)
def test_invalid_unit_names_fail_with_one_line(name):
    with pytest.raises(UnitNameError) as info:
        validate_unit_name(name)
    assert "\n" not in str(info.value).replace(repr(name), "")


def test_sudo_wrap_is_non_interactive():
    assert sudo_wrap(["systemctl", "start", "x.service"], True) == [
        "sudo",
        "-n",
        "--",
        "systemctl",
        "start",
        "x.service",
    ]
    assert sudo_wrap(["systemctl"], False) == ["systemctl"]


def test_sudo_password_prompt_is_reported_as_such():
    result = CommandResult(
        ("sudo", "-n", "--", "systemctl", "start", "x.service"), 1, stderr="sudo: a password is required\n"
    )
    assert wants_password(result)
    with pytest.raises(HostError) as info:
        raise_for_result("gpu-node-1", result, "systemctl start x.service")
    assert "sudo needs a password on gpu-node-1 (use NOPASSWD for systemctl)" in str(info.value)


def test_other_failures_name_the_host_and_the_last_stderr_line():
    result = CommandResult(
        ("systemctl", "start", "x.service"),
        5,
        stderr="Failed to start x.service: Unit x.service not found.\n",
    )
    assert not wants_password(result)
    with pytest.raises(HostError, match=r"^gpu-node-1: systemctl start x.service failed: Failed to start"):
        raise_for_result("gpu-node-1", result, "systemctl start x.service")


def test_line_splitter_handles_split_utf8_crlf_and_runaway_lines():
    s = LineSplitter(max_line_bytes=10)
    text = "héllo\r\nwörld\n".encode()
    out = []
    for i in range(len(text)):
        out += s.feed(text[i : i + 1])
    assert out == ["héllo", "wörld"]
    assert s.feed(b"x" * 25) == ["x" * 10 + " [line cut]"]
    assert s.feed(b"tail\nnext") == []
    assert s.flush() == ["next"]
    assert s.feed(b"\xff\xfe\n") == ["\ufffd\ufffd"]
