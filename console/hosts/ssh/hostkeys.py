"""Strict host-key checking for SSH hosts, with trust on first use only where a host asks for it.

asyncssh checks the server's key against known_hosts and, when the key is not listed, asks the
client object's `validate_host_public_key`. We answer there: record the fingerprint for a clear
refusal, or (trust on first use, host not listed at all) append the key to known_hosts and accept.
A listed host presenting a different key is always refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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
            # Fails closed: a known_hosts that cannot be read might list another key for this host, and
            # a key that cannot be recorded would be trusted afresh, unseen, on every connect.
            unreadable = self.unreadable_files()
            if unreadable:
                self.refusal = (
                    f"cannot read known_hosts {', '.join(unreadable)}, so the key {fingerprint} of {where} "
                    f"cannot be checked; refusing to trust it on first use (fix the file's permissions)"
                )
                return False
            problem = self._record(host, port, key)
            if problem is not None:
                self.refusal = (
                    f"cannot record the key {fingerprint} of {where} in {self.files[0]} ({problem}); "
                    f"refusing to trust it on first use"
                )
                return False
            return True
        self.refusal = (
            f"unknown host key for {where}: {key.get_algorithm()} {fingerprint} is not in known_hosts "
            f"({', '.join(self.files)}); refusing to connect (verify the fingerprint and add it with "
            f"ssh-keyscan, or set trust_on_first_use = true for this host)"
        )
        return False

    def unreadable_files(self) -> list[str]:
        """Configured known_hosts files that exist but cannot be read as files."""
        out = []
        for name in self.files:
            if not os.path.lexists(name):
                continue
            try:
                with open(name, "rb"):
                    pass
            except OSError:
                out.append(name)
        return out

    def _record(self, host: str, port: int, key: asyncssh.SSHKey) -> str | None:
        """Append the key to the first known_hosts file; hashed if that file hashes its hosts (as
        OpenSSH's HashKnownHosts does). Returns why it could not, or None."""
        path = Path(self.files[0])
        algorithm, blob = key.export_public_key("openssh").decode().split()[:2]
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            pattern = host_pattern(host, port)
            if is_hashed(path):
                pattern = hashed_pattern(pattern)
            with path.open("a", encoding="ascii") as fh:
                fh.write(f"{pattern} {algorithm} {blob}\n")
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        return None


def is_hashed(path: Path) -> bool:
    """True when the file already holds hashed host names (`|1|salt|hash`)."""
    try:
        with path.open("rb") as fh:
            return any(line.startswith(b"|1|") for line in fh)
    except FileNotFoundError:
        return False


def hashed_pattern(pattern: str, salt: bytes | None = None) -> str:
    """OpenSSH's hashed host name: `|1|` base64(salt) `|` base64(HMAC-SHA1(salt, pattern))."""
    salt = os.urandom(20) if salt is None else salt
    digest = hmac.new(salt, pattern.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


class JudgingClient(asyncssh.SSHClient):
    """asyncssh client callbacks: host-key decisions go to the judge."""

    def __init__(self, judge: HostKeyJudge) -> None:
        self._judge = judge

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._judge.judge(host, addr, port, key)
