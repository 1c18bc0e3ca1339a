"""An in-process asyncssh server for the SSH transport's unit tests.

It understands a few argv commands (split back from the one quoted command string the client
sends), records what it saw, and can drop every connection on demand.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from console.config import HostConfig


@dataclass
class FakeSshd:
    """A running server plus the client-side files that reach it."""

    port: int
    host_key: asyncssh.SSHKey
    client_key_path: Path
    known_hosts_path: Path
    ssh_config_path: Path
    server: asyncssh.SSHAcceptor | None = None
    commands: list[list[str]] = field(default_factory=list)
    auth_attempts: int = 0
    closed_channels: int = 0
    connections: list[asyncssh.SSHServerConnection] = field(default_factory=list)

    def host_config(self, name: str = "fake", **overrides: object) -> HostConfig:
        values: dict[str, object] = {
            "name": name,
            "address": "127.0.0.1",
            "port": self.port,
            "user": "tester",
            "identity": str(self.client_key_path),
            "known_hosts": str(self.known_hosts_path),
            "ssh_config": str(self.ssh_config_path),
            "connect_timeout_s": 3.0,
        }
        values.update(overrides)
        return HostConfig(**values)  # type: ignore[arg-type]

    def drop_all(self) -> None:
        for conn in self.connections:
            conn.abort()
        self.connections.clear()

    async def stop(self) -> None:
        self.drop_all()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None


async def _handle(sshd: FakeSshd, process: asyncssh.SSHServerProcess) -> None:
    argv = shlex.split(process.command or "")
    sshd.commands.append(argv)
    status = 0
    try:
        if argv[:1] == ["echo-argv"]:
            process.stdout.write(json.dumps(argv[1:]) + "\n")
        elif argv[:1] == ["cat"]:
            async for line in process.stdin:
                process.stdout.write(line)
        elif argv[:1] == ["fail"]:
            process.stderr.write(argv[2] + "\n")
            status = int(argv[1])
        elif argv[:1] == ["lines"]:
            # "lines N": N numbered lines, then stay open until the client closes the channel
            for i in range(int(argv[1])):
                process.stdout.write(f"line {i}\n")
            await process.stdin.read()
        elif argv[:1] == ["sleep"]:
            await asyncio.sleep(float(argv[1]))
        else:
            process.stderr.write(f"{argv[:1]}: command not found\n")
            status = 127
    except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged, asyncssh.ConnectionLost, BrokenPipeError):
        status = 1
    finally:
        sshd.closed_channels += 1
    process.exit(status)


class _Server(asyncssh.SSHServer):
    def __init__(self, sshd: FakeSshd) -> None:
        self.sshd = sshd

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.sshd.connections.append(conn)

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # allow direct-tcpip, so the server can serve as a ProxyJump host
        self.sshd.commands.append(["direct-tcpip", dest_host, str(dest_port)])
        return True

    def begin_auth(self, username: str) -> bool:
        self.sshd.auth_attempts += 1
        return True


async def start_fake_sshd(tmp: Path, *, port: int = 0, host_key: asyncssh.SSHKey | None = None) -> FakeSshd:
    """Start a server on 127.0.0.1 whose key is listed in a fresh known_hosts under `tmp`."""
    host_key = host_key or asyncssh.generate_private_key("ssh-ed25519")
    client_key_path = tmp / "id_ed25519"
    if not client_key_path.exists():
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(client_key_path))
        client_key_path.chmod(0o600)  # OpenSSH tools (ssh-add) refuse readable private keys
        client_key.write_public_key(str(client_key_path) + ".pub")
    client_pub = asyncssh.read_public_key(str(client_key_path) + ".pub")
    sshd = FakeSshd(
        port=port,
        host_key=host_key,
        client_key_path=client_key_path,
        known_hosts_path=tmp / "known_hosts",
        ssh_config_path=tmp / "ssh_config",
    )
    if not sshd.ssh_config_path.exists():
        sshd.ssh_config_path.write_text("")
    authorized = asyncssh.import_authorized_keys(client_pub.export_public_key().decode())
    sshd.server = await asyncssh.create_server(
        lambda: _Server(sshd),
        "127.0.0.1",
        port,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        process_factory=lambda proc: _handle(sshd, proc),
        encoding="utf-8",
    )
    sshd.port = sshd.server.sockets[0].getsockname()[1]
    if not sshd.known_hosts_path.exists():
        line = f"[127.0.0.1]:{sshd.port} {host_key.export_public_key().decode()}"
        sshd.known_hosts_path.write_text(line)
    return sshd
