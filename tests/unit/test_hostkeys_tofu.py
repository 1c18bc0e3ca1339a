"""Trust on first use fails closed, and records hashed keys into a hashed file (issue 10, item 9)."""

from __future__ import annotations

import json

import asyncssh
import pytest
from ssh_fake_server import start_fake_sshd

from console.hosts.hostkeys import HostKeyRefused, hashed_pattern
from console.hosts.ssh import SshTransport


@pytest.fixture
async def sshd(tmp_path):
    server = await start_fake_sshd(tmp_path)
    yield server
    await server.stop()


async def _run_once(cfg):
    t = SshTransport(cfg, backoff_base_s=0.05, backoff_max_s=0.2)
    try:
        return await t.run(["echo-argv", "hi"])
    finally:
        await t.close()


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
    result = await _run_once(sshd.host_config(known_hosts=str(hashed), trust_on_first_use=True))
    assert json.loads(result.stdout) == ["hi"]
    lines = hashed.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("|1|") for line in lines)
    assert "127.0.0.1" not in hashed.read_text()
    assert (await _run_once(sshd.host_config(known_hosts=str(hashed)))).ok  # strict: the hashed key matches


def test_hashed_pattern_is_openssh_format():
    # ssh-keygen -H of "example.com" with this salt gives this hash (HMAC-SHA1 keyed by the salt).
    salt = bytes(range(20))
    assert hashed_pattern("example.com", salt).startswith("|1|AAECAwQFBgcICQoLDA0ODxAREhM=|")
