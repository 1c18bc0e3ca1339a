"""LocalTransport, the host-held flock lock, and build_remote_host's wiring."""

from __future__ import annotations

import asyncio
import stat

import pytest
from waiting import await_event, await_for

import console.hosts.remote as remote
from console.config import HostConfig, ServiceConfig
from console.domain.values import Engine
from console.errors import HostError
from console.hosts.argv import CommandFailed
from console.hosts.base import LockBusy
from console.hosts.endpoints.health import HttpHealthProbe
from console.hosts.local import LocalTransport
from console.hosts.remote import FlockHostLock, NoGpuSource, build_remote_host, lock_path
from console.hosts.ssh.forward import SshPortForward
from console.hosts.ssh.transport import SshTransport
from console.hosts.systemd.manager import SystemdManager


async def test_local_transport_runs_argv_without_a_shell():
    t = LocalTransport()
    result = await t.run(["printf", "%s|", "$(id)", "a b"])
    assert result.ok and result.stdout == "$(id)|a b|"
    assert (await t.run(["cat"], input="x\n")).stdout == "x\n"
    missing = await t.run(["no-such-tool-here"])
    assert missing.exit_status == 127


async def test_local_stream_lines_and_failure():
    t = LocalTransport()
    assert [line async for line in t.stream(["printf", "a\nb\nc"])] == ["a", "b", "c"]
    with pytest.raises(CommandFailed, match="boom"):
        async for _ in t.stream(["sh", "-c", "echo boom >&2; exit 3"]):
            pass


async def test_local_run_times_out_and_kills_the_command():
    t = LocalTransport()
    with pytest.raises(HostError, match="sleep timed out after 0.2 s"):
        await t.run(["sleep", "30"], timeout_s=0.2)


async def test_cancelling_a_local_run_reaches_the_caller():
    t = LocalTransport()
    task = asyncio.create_task(t.run(["sleep", "30"], timeout_s=60))

    def sleeping() -> list[str]:
        return [p for p in _children() if p.endswith("sleep\x0030\x00")]

    await await_for(sleeping, "the command `sleep 30` to start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await await_event(task, "the cancelled run to end")
    await await_for(lambda: not sleeping(), "the cancelled command to be killed")


def _children() -> list[str]:
    """Command lines of this process's children."""
    import os
    from pathlib import Path

    me = str(os.getpid())
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "stat").read_text().split(") ")[1].split()[1] == me:
                out.append((proc / "cmdline").read_bytes().decode("utf-8", "replace"))
        except (OSError, IndexError):
            continue
    return out


def test_lock_names_become_safe_file_names_in_a_dir_only_root_may_write():
    assert lock_path("gpu-node-1/sglang k26;rm") == "/run/serve-console/serve-console-gpu-node-1_sglang_k26_rm.lock"


async def test_the_lock_dir_is_made_private_and_a_symlinked_one_is_refused(tmp_path, monkeypatch):
    lock_dir = tmp_path / "locks"
    monkeypatch.setattr(remote, "LOCK_DIR", str(lock_dir))
    async with FlockHostLock(LocalTransport())("svc"):
        assert (lock_dir / "serve-console-svc.lock").exists()
    assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o700  # no other local user can take the lock
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    monkeypatch.setattr(remote, "LOCK_DIR", str(tmp_path / "link"))
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(HostError, match="lock dir"):
        async with FlockHostLock(LocalTransport())("svc"):
            pass
    assert list(elsewhere.iterdir()) == []


async def test_flock_lock_excludes_a_second_holder_and_is_released_on_exit(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "LOCK_DIR", str(tmp_path))
    lock_a, lock_b = FlockHostLock(LocalTransport()), FlockHostLock(LocalTransport())
    async with lock_a("svc"):
        with pytest.raises(LockBusy, match="locked by another console"):
            async with lock_b("svc"):
                pass
        async with lock_b("other"):  # a different name is independent
            pass
    async with lock_b("svc"):  # released when the first holder left
        pass


async def test_two_concurrent_lockers_exactly_one_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "LOCK_DIR", str(tmp_path))
    wins, busy = [], []
    all_tried = asyncio.Event()

    async def attempt(i):
        # A winner holds the lock until every locker has had its answer (not a fixed time, which a slow
        # `flock` process start outlasts): a second win can then only be the lock's fault.
        try:
            async with FlockHostLock(LocalTransport())("svc"):
                wins.append(i)
                if len(wins) + len(busy) == 4:
                    all_tried.set()
                await await_event(all_tried, "every locker's answer")
        except LockBusy:
            busy.append(i)
            if len(wins) + len(busy) == 4:
                all_tried.set()

    await asyncio.gather(*(attempt(i) for i in range(4)))
    assert len(wins) == 1 and len(busy) == 3


def _svc(**kw):
    base = dict(name="k26", engine=Engine.SGLANG, url="http://127.0.0.1:30000", unit="sglang-k26.service")
    base.update(kw)
    return ServiceConfig(**base)


async def test_build_remote_host_wires_ssh_pieces_without_connecting():
    cfg = HostConfig(
        name="gpu-node-1", address="192.0.2.10", gpus="none", services=(_svc(health_via="ssh", sudo=True),)
    )
    host = build_remote_host(cfg)
    try:
        assert isinstance(host.transport, SshTransport) and host.transport.link is host.link
        assert host.link.state == "connecting"
        assert isinstance(host.services, SystemdManager)
        assert isinstance(host.gpus, NoGpuSource) and (await host.gpus.sample()).error
        probe = host.probes["k26"]
        assert isinstance(probe, HttpHealthProbe) and isinstance(probe.forward, SshPortForward)
        assert probe.forward.remote_port == 30000
    finally:
        await host.close()


async def test_build_remote_host_refuses_settings_the_transport_cannot_honour():
    from console.errors import UsageError

    with pytest.raises(UsageError, match="nvml"):
        build_remote_host(HostConfig(name="h", gpus="nvml"))
    with pytest.raises(UsageError, match="health_via"):
        build_remote_host(
            HostConfig(name="h", transport="local", gpus="none", services=(_svc(health_via="ssh"),))
        )
    local = build_remote_host(HostConfig(name="h", transport="local", gpus="nvml"))
    assert local.link.state == "up" and (await local.gpus.sample()).error is not None
    await local.close()
