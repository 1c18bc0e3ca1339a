"""systemctl/journalctl parsing and SystemdManager's command sequences over a scripted transport."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.values import CommandResult
from console.errors import HostError, UsageError
from console.hosts.argv import TransportLost
from console.hosts.systemd.manager import SystemdManager, journal_argv
from console.hosts.systemd.parse import (
    journal_entry_from_json,
    parse_env_file,
    parse_environment,
    parse_timestamp,
    unit_state_from_show,
)

SHOW_FAILED = """Id=sglang-k26-tp4ep2.service
LoadState=loaded
ActiveState=failed
SubState=failed
Result=exit-code
ExecMainStatus=1
NRestarts=0
MainPID=0
StateChangeTimestamp=@1795940000
ActiveEnterTimestamp=@1795939990
InactiveEnterTimestamp=
"""


def test_show_maps_into_unit_state():
    state = unit_state_from_show("x.service", SHOW_FAILED)
    assert state.unit == "sglang-k26-tp4ep2.service"
    assert (state.active, state.sub, state.result, state.load) == ("failed", "failed", "exit-code", "loaded")
    assert state.exec_main_status == 1 and state.n_restarts == 0 and state.main_pid is None
    assert state.since == 1795940000 and state.is_failed and not state.is_running


def test_show_of_a_missing_unit_and_of_garbage_does_not_crash():
    state = unit_state_from_show(
        "gone.service", "Id=gone.service\nLoadState=not-found\nActiveState=inactive\n"
    )
    assert state.load == "not-found" and state.active == "inactive" and state.since is None
    assert unit_state_from_show("x.service", "garbage\n\x00=\n").active == "unknown"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@1795940000", 1795940000.0),
        ("Sun 2026-11-29 09:08:00 UTC", 1795943280.0),
        ("Sun 2026-11-29 09:08:00.250000 UTC", 1795943280.25),
        ("2026-11-29 10:08:00 +01:00", 1795943280.0),
        ("", None),
        ("n/a", None),
        ("@0", None),
        ("yesterday-ish", None),
    ],
)
def test_timestamps_parse_in_all_formats(text, expected):
    assert parse_timestamp(text) == expected


@given(st.text(max_size=40))
def test_timestamp_parser_never_raises(text):
    parse_timestamp(text)


def test_environment_and_env_files():
    env = parse_environment(
        'CUDA_DEVICE_ORDER=PCI_BUS_ID "SERVE_CONSOLE_LAYOUT_ARGS=--tp-size 8" PYTHONUNBUFFERED=1'
    )
    assert env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "SERVE_CONSOLE_LAYOUT_ARGS": "--tp-size 8",
        "PYTHONUNBUFFERED": "1",
    }
    assert parse_env_file('# c\nA=1\nB="x y"\n\nbad line\n') == {"A": "1", "B": "x y"}


def _json(**fields):
    base = {"__CURSOR": "s=1;i=2", "__REALTIME_TIMESTAMP": "1795940000123456"}
    base.update(fields)
    return json.dumps(base)


def test_journal_entries_from_the_unit_and_from_systemd():
    own = journal_entry_from_json(
        _json(MESSAGE="Load weight begin.", _PID="812", PRIORITY="6", _SYSTEMD_UNIT="sglang-k26-ep8.service"),
        "sglang-k26-ep8.service",
    )
    assert own is not None and own.source == "unit" and own.pid == 812 and own.priority == 6
    assert own.ts == pytest.approx(1795940000.123456) and own.cursor == "s=1;i=2"
    manager = journal_entry_from_json(
        _json(
            MESSAGE="sglang-k26-tp4ep2.service: Failed with result 'exit-code'.",
            _PID="1",
            _COMM="systemd",
            _SYSTEMD_UNIT="init.scope",
            UNIT="sglang-k26-tp4ep2.service",
        ),
        "sglang-k26-tp4ep2.service",
    )
    assert manager is not None and manager.source == "systemd" and manager.unit == "sglang-k26-tp4ep2.service"


def test_binary_and_invalid_utf8_messages_decode_with_replacement():
    entry = journal_entry_from_json(_json(MESSAGE=[104, 105, 255, 10]), "x.service")
    assert entry is not None and entry.message == "hi\ufffd\n"
    assert journal_entry_from_json(_json(MESSAGE=None), "x.service").message == ""


@pytest.mark.parametrize("line", ["", "not json", "[1,2]", '{"MESSAGE": "no cursor"}', "{" * 50])
def test_non_entries_are_skipped(line):
    assert journal_entry_from_json(line, "x.service") is None


def test_journal_argv_positions():
    assert "--no-tail" in journal_argv("x.service", after_cursor=None, follow=True, lines=None)
    assert "--lines=0" in journal_argv("x.service", after_cursor=None, follow=True, lines=0)
    argv = journal_argv("x.service", after_cursor="s=1;i=2", follow=True, lines=50)
    assert "--after-cursor=s=1;i=2" in argv and not any(a.startswith("--lines") for a in argv)
    assert "-f" not in journal_argv("x.service", after_cursor=None, follow=False, lines=None)
    with pytest.raises(UsageError):
        journal_argv("x;reboot.service", after_cursor=None, follow=True, lines=None)


class ScriptedTransport:
    """Records argv lists; answers from a function; streams from a list of scripted runs."""

    name = "gpu-node-1"

    def __init__(self, answer=None, streams=()):
        self.calls: list[tuple[tuple[str, ...], str | None]] = []
        self.answer = answer or (lambda argv: CommandResult(tuple(argv), 0))
        self.streams = list(streams)
        self.stream_argvs: list[list[str]] = []

    async def run(self, argv, *, input=None, timeout_s=None):
        self.calls.append((tuple(argv), input))
        return self.answer(argv)

    async def stream(self, argv):
        self.stream_argvs.append(list(argv))
        lines, exc = self.streams.pop(0)
        for line in lines:
            yield line
        if exc is not None:
            raise exc

    async def close(self):
        pass


async def test_start_resets_failed_first_and_does_not_wait_for_the_job():
    t = ScriptedTransport()
    await SystemdManager(t).start("sglang-k26@tp4ep2.service")
    assert [c[0] for c in t.calls] == [
        ("systemctl", "reset-failed", "sglang-k26@tp4ep2.service"),
        ("systemctl", "start", "--no-block", "sglang-k26@tp4ep2.service"),
    ]


async def test_sudo_units_go_through_sudo_n_and_a_password_prompt_is_reported():
    def answer(argv):
        if argv[0] == "sudo":
            return CommandResult(tuple(argv), 1, stderr="sudo: a password is required\n")
        return CommandResult(tuple(argv), 0)

    t = ScriptedTransport(answer)
    mgr = SystemdManager(t, sudo_units=frozenset({"a.service"}))
    with pytest.raises(
        HostError, match=r"sudo needs a password on gpu-node-1 \(use NOPASSWD for systemctl\)"
    ):
        await mgr.stop("a.service")
    assert t.calls[-1][0][:3] == ("sudo", "-n", "--")
    await mgr.stop("b.service")
    assert t.calls[-1][0] == ("systemctl", "stop", "b.service")


async def test_write_file_goes_through_a_temp_file_and_rename():
    t = ScriptedTransport()
    mgr = SystemdManager(t)
    await mgr.write_file("/etc/serve-console/sglang-k26.env", "SERVE_CONSOLE_LAYOUT_ARGS=--tp-size 8\n")
    argvs = [c[0] for c in t.calls]
    path = "/etc/serve-console/sglang-k26.env"
    assert argvs[0] == ("mkdir", "-p", "/etc/serve-console")
    tmp = argvs[1][-1]  # the old file's mode and owner carry over: the temp file starts as its copy
    assert argvs[1] == ("cp", "-p", "--", path, tmp) and tmp.startswith(path + ".serve-console-")
    assert argvs[2] == ("tee", tmp) and t.calls[2][1] == "SERVE_CONSOLE_LAYOUT_ARGS=--tp-size 8\n"
    assert argvs[3] == ("mv", "-f", tmp, path)
    with pytest.raises(UsageError):
        await mgr.write_file("relative/path", "x")
    with pytest.raises(UsageError):
        await mgr.write_file("/etc/../etc/x", "x")


async def test_state_falls_back_when_timestamp_unix_is_unknown():
    def answer(argv):
        if "--timestamp=unix" in argv:
            return CommandResult(tuple(argv), 1, stderr="systemctl: unrecognized option '--timestamp=unix'")
        return CommandResult(
            tuple(argv),
            0,
            stdout="ActiveState=active\nSubState=running\n"
            "StateChangeTimestamp=Sun 2026-11-29 09:08:00 UTC\nMainPID=42\n",
        )

    state = await SystemdManager(ScriptedTransport(answer)).state("x.service")
    assert state.active == "active" and state.main_pid == 42 and state.since == 1795943280.0


async def test_journal_resumes_after_the_last_cursor_seen_without_repeats():
    def line(i):
        return _json(__CURSOR=f"c{i}", MESSAGE=f"m{i}", _PID="5")

    t = ScriptedTransport(
        streams=[
            ([line(1), line(2)], TransportLost("gpu-node-1", "connection lost")),
            ([], TransportLost("gpu-node-1", "connection lost")),
            ([line(3), "garbage", line(4)], None),
        ]
    )
    got = [e.message async for e in SystemdManager(t).journal("x.service", follow=True, lines=0)]
    assert got == ["m1", "m2", "m3", "m4"]
    assert "--no-tail" in t.stream_argvs[0]  # no entries before: "new ones" are all of them
    assert "--after-cursor=c2" in t.stream_argvs[1] and "--after-cursor=c2" in t.stream_argvs[2]


async def test_only_new_entries_are_anchored_to_a_cursor_so_an_early_drop_loses_nothing():
    def answer(argv):
        return CommandResult(tuple(argv), 0, stdout=_json(__CURSOR="anchor", MESSAGE="old") + "\n")

    t = ScriptedTransport(
        answer,
        streams=[
            ([], TransportLost("gpu-node-1", "connection lost")),
            ([_json(__CURSOR="c1", MESSAGE="new")], None),
        ],
    )
    got = [e.message async for e in SystemdManager(t).journal("x.service", follow=True, lines=0)]
    assert got == ["new"]
    assert "--after-cursor=anchor" in t.stream_argvs[0] and "--after-cursor=anchor" in t.stream_argvs[1]
