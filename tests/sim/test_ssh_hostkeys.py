"""Strict host-key checking: unknown and changed keys are refused before login; TOFU only on request."""

from __future__ import annotations

import json

import asyncssh
import pytest
from ssh_fake_server import start_fake_sshd

from console.hosts.ssh.hostkeys import HostKeyRefused, hashed_pattern
from console.hosts.ssh.transport import SshTransport


@pytest.fixture
async def sshd(tmp_path):
    server = await start_fake_sshd(tmp_path)
    yield server
    await server.stop()


async def _run_once(cfg):
    t = SshTransport(cfg, backoff_base_s=0.05, backoff_max_s=0.2)
    try:
        return await t.run(["echo-argv", "hi"]), t.link
    finally:
        await t.close()


async def test_unknown_key_is_refused_with_host_and_fingerprint(sshd, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyRefused) as info:
        await _run_once(sshd.host_config(name="gpu-node-1", known_hosts=str(empty)))
    message = str(info.value)
    assert message.startswith("gpu-node-1: unknown host key for 127.0.0.1")
    assert sshd.host_key.get_fingerprint("sha256") in message
    assert "SHA256:" in message and "\n" not in message
    assert sshd.auth_attempts == 0 and sshd.commands == []


async def test_changed_key_is_refused_naming_both_fingerprints(sshd, tmp_path):
    old = asyncssh.generate_private_key("ssh-ed25519")
    stale = tmp_path / "stale_known_hosts"
    stale.write_text(f"[127.0.0.1]:{sshd.port} {old.export_public_key().decode()}")
    with pytest.raises(HostKeyRefused) as info:
        await _run_once(sshd.host_config(known_hosts=str(stale)))
    message = str(info.value)
    assert "HOST KEY CHANGED" in message
    assert sshd.host_key.get_fingerprint("sha256") in message
    assert old.get_fingerprint("sha256") in message
    assert sshd.auth_attempts == 0 and sshd.commands == []


async def test_changed_key_is_refused_even_with_trust_on_first_use(sshd, tmp_path):
    old = asyncssh.generate_private_key("ssh-ed25519")
    stale = tmp_path / "stale_known_hosts"
    stale.write_text(f"[127.0.0.1]:{sshd.port} {old.export_public_key().decode()}")
    with pytest.raises(HostKeyRefused, match="CHANGED"):
        await _run_once(sshd.host_config(known_hosts=str(stale), trust_on_first_use=True))
    assert sshd.commands == []


async def test_trust_on_first_use_records_the_key_and_later_connections_need_it(sshd, tmp_path):
    fresh = tmp_path / "sub" / "known_hosts"
    result, _ = await _run_once(sshd.host_config(known_hosts=str(fresh), trust_on_first_use=True))
    assert json.loads(result.stdout) == ["hi"]
    recorded = fresh.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    # strict again: the recorded key is now what is trusted
    result, _ = await _run_once(sshd.host_config(known_hosts=str(fresh)))
    assert result.ok


async def test_ssh_config_alias_user_port_identity_and_known_hosts_are_honoured(sshd, tmp_path):
    config = tmp_path / "alias_config"
    config.write_text(
        "Host gpu-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {sshd.port}\n"
        "  User tester\n"
        f"  IdentityFile {sshd.client_key_path}\n"
        f"  UserKnownHostsFile {sshd.known_hosts_path}\n"
    )
    cfg = sshd.host_config(
        name="gpu-node-2",
        address="gpu-alias",
        port=None,
        user=None,
        identity=None,
        known_hosts=None,
        ssh_config=str(config),
    )
    result, link = await _run_once(cfg)
    assert result.ok and link.state == "up"


async def test_known_hosts_none_in_ssh_config_does_not_switch_checking_off(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = tmp_path / "lax_config"
    config.write_text("Host *\n  UserKnownHostsFile none\n  StrictHostKeyChecking no\n")
    with pytest.raises(HostKeyRefused, match="unknown host key"):
        await _run_once(sshd.host_config(known_hosts=None, ssh_config=str(config)))
    assert sshd.commands == []


async def test_proxyjump_from_ssh_config_reaches_the_target_through_the_jump_host(tmp_path):
    jump = await start_fake_sshd(tmp_path)
    target = await start_fake_sshd(tmp_path)  # same client key (reused from tmp_path)
    try:
        known = tmp_path / "known_both"
        known.write_text(
            f"[127.0.0.1]:{jump.port} {jump.host_key.export_public_key().decode()}"
            f"[127.0.0.1]:{target.port} {target.host_key.export_public_key().decode()}"
        )
        config = tmp_path / "jump_config"
        common = f"  HostName 127.0.0.1\n  User tester\n  IdentityFile {jump.client_key_path}\n  UserKnownHostsFile {known}\n"
        config.write_text(
            f"Host bastion\n  Port {jump.port}\n{common}Host gpu-behind\n  Port {target.port}\n  ProxyJump bastion\n{common}"
        )
        cfg = target.host_config(
            name="gpu-node-3", address="gpu-behind", port=None, user=None, identity=None,
            known_hosts=None, ssh_config=str(config),
        )  # fmt: skip
        result, _ = await _run_once(cfg)
        assert json.loads(result.stdout) == ["hi"]
        assert ["direct-tcpip", "127.0.0.1", str(target.port)] in jump.commands
        assert target.commands == [["echo-argv", "hi"]]
    finally:
        await jump.stop()
        await target.stop()


# Trust on first use fails closed, and records hashed keys into a hashed file (issue 10, item 9).


async def test_an_unreadable_known_hosts_refuses_trust_on_first_use(sshd, tmp_path):
    unreadable = tmp_path / "known_hosts_dir"
    unreadable.mkdir()  # exists, cannot be read as a file (root reads any mode, so not a chmod)
    for _ in range(2):  # and never on a later connect either
        with pytest.raises(HostKeyRefused, match="cannot read known_hosts"):
            await _run_once(sshd.host_config(known_hosts=str(unreadable), trust_on_first_use=True))
    assert sshd.auth_attempts == 0 and sshd.commands == []


async def test_a_key_that_cannot_be_recorded_is_refused(sshd, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    target = blocker / "known_hosts"  # its parent is a file: the write must fail
    with pytest.raises(HostKeyRefused, match="cannot record the key"):
        await _run_once(sshd.host_config(known_hosts=str(target), trust_on_first_use=True))
    assert sshd.commands == []


async def test_a_key_recorded_into_a_hashed_file_is_hashed(sshd, tmp_path):
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    hashed = tmp_path / "hashed_known_hosts"
    hashed.write_text(f"{hashed_pattern('other.example')} {other}")
    result, _ = await _run_once(sshd.host_config(known_hosts=str(hashed), trust_on_first_use=True))
    assert json.loads(result.stdout) == ["hi"]
    lines = hashed.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("|1|") for line in lines)
    assert "127.0.0.1" not in hashed.read_text()
    assert (await _run_once(sshd.host_config(known_hosts=str(hashed))))[0].ok  # strict: the hashed key matches


def test_hashed_pattern_is_openssh_format():
    # ssh-keygen -H of "example.com" with this salt gives this hash (HMAC-SHA1 keyed by the salt).
    salt = bytes(range(20))
    assert hashed_pattern("example.com", salt).startswith("|1|AAECAwQFBgcICQoLDA0ODxAREhM=|")
