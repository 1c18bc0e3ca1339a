"""SshTransport against an in-process asyncssh server: quoting, streams, drops and down hosts."""

from __future__ import annotations

import asyncio
import json

import pytest
from ports import free_port
from ssh_fake_server import start_fake_sshd
from waiting import await_for, wait_for

from console.errors import HostError
from console.hosts.argv import CommandFailed, TransportLost
from console.hosts.ssh.transport import SshTransport


@pytest.fixture
async def sshd(tmp_path):
    server = await start_fake_sshd(tmp_path)
    yield server
    await server.stop()


@pytest.fixture
async def transport(sshd):
    t = SshTransport(sshd.host_config(), backoff_base_s=0.05, backoff_max_s=0.2)
    yield t
    await t.close()


TRICKY = ["echo-argv", "two words", "it's", '"dq"', "$(reboot)", "a;b", "x\ny", "*", "ünï", "-n", ""]


async def test_run_round_trips_argv_exactly(transport, sshd):
    result = await transport.run(TRICKY)
    assert result.ok
    assert json.loads(result.stdout) == TRICKY[1:]
    assert sshd.commands == [TRICKY]


async def test_run_reports_exit_status_and_stderr_and_passes_input(transport):
    failed = await transport.run(["fail", "3", "no such unit"])
    assert failed.exit_status == 3 and "no such unit" in failed.stderr
    echoed = await transport.run(["cat"], input="hello\nworld\n")
    assert echoed.stdout == "hello\nworld\n"
    # stdin ends even without input (or with an empty one): nothing waits for the console
    assert (await transport.run(["cat"], timeout_s=5)).stdout == ""
    assert (await transport.run(["cat"], input="", timeout_s=5)).stdout == ""


async def test_commands_share_one_connection(transport, sshd):
    await asyncio.gather(*(transport.run(["echo-argv", str(i)]) for i in range(8)))
    assert len(sshd.connections) == 1


async def test_stream_yields_lines_and_closing_it_closes_the_channel(transport, sshd):
    got = []
    stream = transport.stream(["lines", "5"])
    async for line in stream:
        got.append(line)
        if len(got) == 5:
            break
    await stream.aclose()
    assert got == [f"line {i}" for i in range(5)]
    await await_for(lambda: sshd.closed_channels, "the server to see the stream's channel closed")
    assert sshd.closed_channels == 1


async def test_stream_raises_command_failed_on_nonzero_exit(transport):
    with pytest.raises(CommandFailed, match="bad cursor"):
        async for _ in transport.stream(["fail", "1", "bad cursor"]):
            pass


async def test_drop_raises_transport_lost_then_reconnects_and_counts(transport, sshd):
    assert (await transport.run(["echo-argv"])).ok
    stream = transport.stream(["lines", "1"])
    assert await anext(stream) == "line 0"
    sshd.drop_all()
    with pytest.raises(TransportLost):
        await anext(stream)
    result = await transport.run(["echo-argv", "again"])
    assert json.loads(result.stdout) == ["again"]
    assert transport.link.state == "up"
    assert transport.link.reconnects == 1
    # the resumed stream waits for the connection and works again
    resumed = transport.stream(["lines", "2"])
    assert [await anext(resumed), await anext(resumed)] == ["line 0", "line 1"]
    await resumed.aclose()


async def test_down_host_fails_fast_and_does_not_block_another(tmp_path, sshd, transport):
    down = SshTransport(
        sshd.host_config(name="dead", port=free_port()), backoff_base_s=0.05, backoff_max_s=0.2
    )
    try:
        good, bad = await asyncio.gather(
            transport.run(["echo-argv", "ok"]), down.run(["echo-argv"]), return_exceptions=True
        )
        assert not isinstance(good, BaseException) and good.ok
        assert isinstance(bad, HostError) and "dead" in str(bad)
        assert down.link.state == "down" and down.link.error
        assert transport.link.state == "up"
    finally:
        await down.close()


async def test_host_that_comes_back_is_marked_up_again(tmp_path):
    port = free_port()
    first = await start_fake_sshd(tmp_path, port=port)
    t = SshTransport(first.host_config(), backoff_base_s=0.05, backoff_max_s=0.2)
    try:
        assert (await t.run(["echo-argv"])).ok
        await first.stop()
        with pytest.raises(HostError):
            await t.run(["echo-argv"])
        assert t.link.state == "down" and t.link.error
        second = await start_fake_sshd(tmp_path, port=port, host_key=first.host_key)
        try:
            await await_for(lambda: t.link.state == "up", "the link to reconnect to the new server")
            assert t.link.state == "up" and t.link.reconnects >= 1
            assert (await t.run(["echo-argv", "back"])).ok
        finally:
            await second.stop()
    finally:
        await t.close()


async def test_run_timeout_is_a_host_error(transport):
    with pytest.raises(HostError, match="timed out"):
        await transport.run(["sleep", "5"], timeout_s=0.3)


async def test_long_lived_channels_are_capped_with_a_clear_error(transport):
    from console.hosts.ssh.transport import MAX_STREAMS

    streams = [transport.stream(["lines", "1"]) for _ in range(MAX_STREAMS)]
    for s in streams:
        assert await anext(s) == "line 0"
    with pytest.raises(HostError, match="too many long-lived SSH channels"):
        await anext(transport.stream(["lines", "1"]))
    for s in streams:
        await s.aclose()
    extra = transport.stream(["lines", "1"])  # slots are returned when streams close
    assert await anext(extra) == "line 0"
    await extra.aclose()


@pytest.fixture
def agent_with_key(sshd, tmp_path):
    """A private ssh-agent holding the fake server's client key; yields its socket path."""
    import subprocess

    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        wait_for(sock.exists, "ssh-agent's socket")
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", str(sshd.client_key_path)], env=env, check=True, capture_output=True)
        yield str(sock)
    finally:
        agent.terminate()
        agent.wait()


async def test_ssh_agent_keys_are_used_when_no_identity_is_configured(
    sshd, agent_with_key, tmp_path, monkeypatch
):
    monkeypatch.setenv("SSH_AUTH_SOCK", agent_with_key)
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))  # no ~/.ssh/id_* to fall back on
    t = SshTransport(sshd.host_config(identity=None))
    try:
        assert (await t.run(["echo-argv", "via-agent"])).ok
    finally:
        await t.close()
