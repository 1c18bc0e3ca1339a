"""Faults against real hosts: a stopped host, a changed host key, sudo without NOPASSWD, a cut
network, two consoles racing for one service's lock."""

from __future__ import annotations

import asyncio
import time

import asyncssh
import pytest
from remote_helpers import bed_host_config, wait_until
from waiting import await_event

from console.errors import HostError
from console.hosts.base import LockBusy
from console.hosts.remote import build_remote_host
from console.hosts.ssh.hostkeys import HostKeyRefused
from console.hosts.ssh.transport import SshTransport
from console.hosts.systemd.manager import SystemdManager

pytestmark = pytest.mark.integration


async def test_a_stopped_host_is_marked_down_the_other_works_and_it_recovers(clean_testbed):
    bed = clean_testbed
    if len(bed.hosts) < 2:
        pytest.skip("needs two test hosts")
    one = build_remote_host(bed_host_config(bed, "tb1", connect_timeout_s=3.0))
    two = build_remote_host(bed_host_config(bed, "tb2", connect_timeout_s=3.0))
    try:
        assert (await two.services.state("noisy.service")).load == "loaded"
        await asyncio.to_thread(bed.stop_host, "tb2", kill=True)
        await wait_until(lambda: two.link.state == "down", 30, "tb2 marked down")
        started = time.monotonic()
        good, bad = await asyncio.gather(
            one.services.state("noisy.service"), two.services.state("noisy.service"), return_exceptions=True
        )
        assert not isinstance(good, BaseException) and good.load == "loaded"
        assert isinstance(bad, HostError) and str(bad).startswith("tb2: ")
        assert time.monotonic() - started < 10  # the down host fails fast instead of hanging the other
        snapshot = await one.gpus.sample()
        assert len(snapshot.gpus) == 8 and snapshot.error is None
        await asyncio.to_thread(bed.start_host, "tb2")
        await wait_until(lambda: two.link.state == "up", 90, "tb2 reconnected", interval_s=0.2)
        assert two.link.reconnects >= 1
        assert (await two.services.state("noisy.service")).load == "loaded"
    finally:
        await one.close()
        await two.close()


async def test_a_changed_host_key_is_refused_and_nothing_runs(clean_testbed):
    bed = clean_testbed
    new_line = await asyncio.to_thread(bed.replace_host_key, "tb1")
    new_fp = asyncssh.import_public_key(new_line).get_fingerprint("sha256")
    transport = SshTransport(bed_host_config(bed, "tb1"))
    try:
        with pytest.raises(HostKeyRefused) as info:
            await transport.run(["touch", "/tmp/should-not-exist"])
        message = str(info.value)
        assert message.startswith("tb1: HOST KEY CHANGED for ") and new_fp in message
        assert transport.link.state == "down" and "CHANGED" in (transport.link.error or "")
    finally:
        await transport.close()
    await asyncio.to_thread(bed.restore_host_key, "tb1")
    assert not (bed.host("tb1").root / "tmp/should-not-exist").exists()


async def test_sudo_without_nopasswd_is_reported_and_with_it_works(clean_testbed):
    bed = clean_testbed
    operator = SshTransport(bed_host_config(bed, "tb1", user="operator"))
    deploy = SshTransport(bed_host_config(bed, "tb1", user="deploy"))
    try:
        with pytest.raises(HostError) as info:
            await SystemdManager(operator, sudo=True).start("noisy.service")
        assert str(info.value).startswith("tb1: sudo needs a password on tb1 (use NOPASSWD for systemctl)")
        manager = SystemdManager(deploy, sudo=True)
        await manager.start("noisy.service")
        await wait_until(lambda: _active(manager), 20, "noisy.service active")
        await manager.stop("noisy.service")
        assert (await manager.state("noisy.service")).active == "inactive"
    finally:
        await operator.close()
        await deploy.close()


async def _active(manager: SystemdManager) -> bool:
    return (await manager.state("noisy.service")).active == "active"


async def test_a_cut_network_is_noticed_by_keepalives_and_healed(clean_testbed):
    bed = clean_testbed
    transport = SshTransport(
        bed_host_config(bed, "tb1", connect_timeout_s=2.0),
        keepalive_interval_s=0.5, keepalive_count_max=2, backoff_base_s=0.1, backoff_max_s=1.0,
    )  # fmt: skip
    try:
        assert (await transport.run(["true"])).ok
        with bed.network_cut("tb1"):
            await wait_until(lambda: transport.link.state == "down", 15, "the cut to be noticed")
            with pytest.raises(HostError):
                await transport.run(["true"])
        await wait_until(lambda: transport.link.state == "up", 30, "the link to heal")
        assert (await transport.run(["true"])).ok and transport.link.reconnects >= 1
    finally:
        await transport.close()


async def test_two_consoles_locking_one_service_exactly_one_wins(clean_testbed):
    bed = clean_testbed
    consoles = [build_remote_host(bed_host_config(bed, "tb1", gpus="none")) for _ in range(2)]
    holders, refused = [], []
    both_answered = asyncio.Event()

    async def attempt(i: int) -> None:
        # The holder keeps the lock until the other console has its answer, however slow its SSH start:
        # a second holder can then only be the lock's fault (it would wait here in vain, and fail).
        try:
            async with consoles[i].lock("switch-k26"):
                holders.append(i)
                if len(holders) + len(refused) == 2:
                    both_answered.set()
                await await_event(both_answered, "the other console's answer")
        except LockBusy as exc:
            refused.append(str(exc))
            if len(holders) + len(refused) == 2:
                both_answered.set()

    try:
        await asyncio.gather(attempt(0), attempt(1))
        assert len(holders) == 1 and len(refused) == 1
        assert "locked by another console" in refused[0]
        async with consoles[1 - holders[0]].lock("switch-k26"):  # released with its channel
            pass
    finally:
        for host in consoles:
            await host.close()


async def test_unknown_key_refused_then_trusted_on_first_use_only_when_asked(clean_testbed, tmp_path):
    bed = clean_testbed
    pub = (bed.host("tb1").root / "etc/ssh/ssh_host_ed25519_key.pub").read_text()
    fingerprint = asyncssh.import_public_key(pub).get_fingerprint("sha256")
    fresh = tmp_path / "known_hosts"
    fresh.write_text("")
    strict = SshTransport(bed_host_config(bed, "tb1", known_hosts=str(fresh)))
    try:
        with pytest.raises(HostKeyRefused) as info:
            await strict.run(["true"])
        assert str(info.value).startswith("tb1: unknown host key for ") and fingerprint in str(info.value)
    finally:
        await strict.close()
    assert fresh.read_text() == ""
    tofu = SshTransport(bed_host_config(bed, "tb1", known_hosts=str(fresh), trust_on_first_use=True))
    try:
        assert (await tofu.run(["true"])).ok
    finally:
        await tofu.close()
    assert pub.split()[1] in fresh.read_text()
    again = SshTransport(bed_host_config(bed, "tb1", known_hosts=str(fresh)))
    try:
        assert (await again.run(["true"])).ok  # strict, with the recorded key
    finally:
        await again.close()


async def test_the_channel_caps_fit_under_openssh_maxsessions(clean_testbed):
    from console.hosts.ssh.transport import MAX_RUNS, MAX_STREAMS

    bed = clean_testbed
    transport = SshTransport(bed_host_config(bed, "tb1"))
    streams = [transport.stream(["sh", "-c", "echo up; exec cat"]) for _ in range(MAX_STREAMS)]
    try:
        for s in streams:
            assert await anext(s) == "up"
        # every stream open, and still a full set of concurrent commands on the same connection
        results = await asyncio.gather(*(transport.run(["sleep", "0.3"]) for _ in range(MAX_RUNS * 3)))
        assert all(r.ok for r in results)
    finally:
        for s in streams:
            await s.aclose()
        await transport.close()
