"""Strict host-key checking for SSH hosts, with trust on first use only where a host asks for it.

asyncssh checks the server's key against known_hosts and, when the key is not listed, asks the
client object's `validate_host_public_key`. We answer there: record the fingerprint for a clear
refusal, or (trust on first use, host not listed at all) append the key to known_hosts and accept.
A listed host presenting a different key is always refused.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import asyncssh

from console.errors import HostError

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class HostKeyRefused(HostError):
    """The server's host key is unknown or changed; the console did not connect."""


def known_hosts_files(configured: str | None, from_ssh_config: object) -> list[str]:
    """The known_hosts files to check, in order; never empty, so checking is never switched off.

    Args:
        configured: HostConfig.known_hosts, if set (wins).
        from_ssh_config: asyncssh's resolved option (UserKnownHostsFile + GlobalKnownHostsFile), which
            is None when the config says `UserKnownHostsFile none`.
    """
    if configured:
        return [str(Path(configured).expanduser())]
    if isinstance(from_ssh_config, list | tuple) and from_ssh_config:
        return [str(Path(str(p)).expanduser()) for p in from_ssh_config]
    return [str(Path(DEFAULT_KNOWN_HOSTS).expanduser())]


def host_pattern(host: str, port: int | None) -> str:
    """The known_hosts pattern OpenSSH writes for host:port."""
    return host if port in (None, 22) else f"[{host}]:{port}"


class HostKeyJudge:
    """Decides about keys that known_hosts does not list, and remembers why it refused."""

    def __init__(self, host_name: str, files: list[str], trust_on_first_use: bool) -> None:
        self.host_name = host_name
        self.files = files
        self.trust_on_first_use = trust_on_first_use
        self.refusal: str | None = None

    def readable_files(self) -> list[str]:
        return [f for f in self.files if os.path.isfile(f) and os.access(f, os.R_OK)]

    def known_hosts_arg(self) -> list[str] | bytes:
        """What to pass as asyncssh's `known_hosts`: the readable files, or no keys at all."""
        return self.readable_files() or b""

    def listed_keys(self, host: str, addr: str, port: int | None) -> list[asyncssh.SSHKey]:
        files = self.readable_files()
        if not files:
            return []
        port_arg = None if port in (None, 22) else port
        return list(asyncssh.match_known_hosts(files, host, addr, port_arg)[0])

    def judge(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Accept or refuse a key known_hosts did not match (called by asyncssh during key exchange)."""
        fingerprint = key.get_fingerprint("sha256")
        where = (
            f"{host}"
            + (f" ({addr})" if addr and addr != host else "")
            + (f" port {port}" if port != 22 else "")
        )
        listed = self.listed_keys(host, addr, port)
        if listed:
            known = ", ".join(k.get_fingerprint("sha256") for k in listed)
            self.refusal = (
                f"HOST KEY CHANGED for {where}: the server presents {key.get_algorithm()} {fingerprint}, "
                f"but known_hosts ({', '.join(self.files)}) lists {known}; refusing to connect "
                f"(possible man-in-the-middle; if the change is expected, remove the old key with "
                f"ssh-keygen -R {host_pattern(host, port)})"
            )
            return False
        if self.trust_on_first_use:
            self._record(host, port, key)
            return True
        self.refusal = (
            f"unknown host key for {where}: {key.get_algorithm()} {fingerprint} is not in known_hosts "
            f"({', '.join(self.files)}); refusing to connect (verify the fingerprint and add it with "
            f"ssh-keyscan, or set trust_on_first_use = true for this host)"
        )
        return False

    def _record(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        path = Path(self.files[0])
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = f"{host_pattern(host, port)} {key.export_public_key('openssh').decode().split()[0]} "
        line += key.export_public_key("openssh").decode().split()[1] + "\n"
        with contextlib.suppress(OSError), path.open("a", encoding="ascii") as fh:
            fh.write(line)


class JudgingClient(asyncssh.SSHClient):
    """asyncssh client callbacks: host-key decisions go to the judge."""

    def __init__(self, judge: HostKeyJudge) -> None:
        self._judge = judge

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._judge.judge(host, addr, port, key)
