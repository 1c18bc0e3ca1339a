"""The supervised SSH connection to one host: connect, watch, reconnect.

A supervisor task owns the connection: it connects (honouring ~/.ssh/config or the host's
ssh_config, known_hosts and ssh-agent), waits for the connection to close, and reconnects with
jittered exponential backoff, keeping the Host's LinkStatus current. `connection()` fails fast while
the host is down, or waits for it to come back. The seam with console.hosts.ssh.transport: this module knows
how to hold a connection open, that one what runs over its channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random

import asyncssh

from console.config import HostConfig
from console.errors import HostError
from console.hosts.argv import TransportLost
from console.hosts.base import LinkStatus
from console.hosts.ssh.hostkeys import HostKeyJudge, HostKeyRefused, JudgingClient, known_hosts_files

# Timeouts use `asyncio.timeout`, never `asyncio.wait_for` (console.hosts.ssh.transport says why).


def describe_error(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class SshConnection:
    """One host's shared, self-healing asyncssh connection, and the LinkStatus that reports it.

    Args:
        cfg: the host; its address, port, user, identity, ssh_config and known_hosts settings.
        link: the LinkStatus to keep current (a fresh one when none is given).
        keepalive_interval_s: seconds between SSH keepalives.
        keepalive_count_max: unanswered keepalives before the connection counts as dropped.
        backoff_base_s: the first pause before reconnecting; it doubles with each failure.
        backoff_max_s: the longest pause between reconnect attempts.
    """

    def __init__(
        self,
        cfg: HostConfig,
        link: LinkStatus | None = None,
        *,
        keepalive_interval_s: float = 5.0,
        keepalive_count_max: int = 3,
        backoff_base_s: float = 0.2,
        backoff_max_s: float = 15.0,
    ) -> None:
        self.name = cfg.name
        self.cfg = cfg
        self.link = link if link is not None else LinkStatus()
        self._keepalive = (keepalive_interval_s, keepalive_count_max)
        self._backoff = (backoff_base_s, backoff_max_s)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._attempting = False
        self._last_error: HostError | None = None
        self._ever_connected = False
        self._closing = False

    @property
    def target(self) -> str:
        """What we connect to: the address, a ~/.ssh/config alias, or the host name."""
        return self.cfg.address or self.cfg.name

    def _option_kwargs(self) -> dict[str, object]:
        cfg = self.cfg
        kwargs: dict[str, object] = {
            "connect_timeout": cfg.connect_timeout_s,
            "login_timeout": cfg.connect_timeout_s,
            "keepalive_interval": self._keepalive[0],
            "keepalive_count_max": self._keepalive[1],
        }
        if cfg.ssh_config:
            kwargs["config"] = [os.path.expanduser(cfg.ssh_config)]
        if cfg.port:
            kwargs["port"] = cfg.port
        if cfg.user:
            kwargs["username"] = cfg.user
        if cfg.identity:
            kwargs["client_keys"] = [os.path.expanduser(cfg.identity)]
        return kwargs

    async def _options(self) -> tuple[dict[str, object], HostKeyJudge]:
        """asyncssh connect options, and the judge for keys known_hosts does not list.

        The ssh config is resolved once here only to learn its known_hosts files; `connect()` gets
        the raw options (with `config`), so asyncssh also applies that config to ProxyJump hops.
        """
        cfg = self.cfg
        kwargs = self._option_kwargs()
        resolved = await asyncssh.SSHClientConnectionOptions.construct(None, host=self.target, **kwargs)
        judge = HostKeyJudge(
            self.name, known_hosts_files(cfg.known_hosts, resolved.known_hosts), cfg.trust_on_first_use
        )
        kwargs["known_hosts"] = judge.known_hosts_arg()
        return kwargs, judge

    async def _connect_once(self) -> asyncssh.SSHClientConnection:
        try:
            kwargs, judge = await self._options()
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise HostError(self.name, f"bad SSH settings: {describe_error(exc)}") from None
        try:
            return await asyncssh.connect(self.target, client_factory=lambda: JudgingClient(judge), **kwargs)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyRefused(self.name, judge.refusal or describe_error(exc)) from None
        except asyncssh.PermissionDenied:
            raise HostError(self.name, f"SSH login to {self.target} refused (no accepted key)") from None
        except TimeoutError:
            raise HostError(
                self.name, f"SSH connect to {self.target} timed out after {self.cfg.connect_timeout_s:g} s"
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise HostError(
                self.name, f"SSH connect to {self.target} failed: {describe_error(exc)}"
            ) from None
        except Exception as exc:  # e.g. an unreadable key file; the supervisor must live on
            raise HostError(
                self.name, f"SSH connect to {self.target} failed: {type(exc).__name__}: {describe_error(exc)}"
            ) from None

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _delay(self, failures: int) -> float:
        base, cap = self._backoff
        return min(cap, base * 2**failures) * random.uniform(0.5, 1.0)

    async def _supervise(self) -> None:
        failures = 0
        while not self._closing:
            self._attempting = True
            self._notify()
            try:
                conn = await self._connect_once()
            except HostError as exc:
                self._attempting = False
                self._last_error = exc
                self.link.mark_down(str(exc).removeprefix(f"{self.name}: "))
                self._notify()
                await asyncio.sleep(self._delay(failures))
                failures = min(failures + 1, 16)
                continue
            if self._ever_connected:
                self.link.reconnects += 1
            self._ever_connected, failures, self._last_error = True, 0, None
            self._conn = conn
            self._attempting = False
            self.link.mark_up()
            self._notify()
            await conn.wait_closed()
            self._conn = None
            if self._closing:
                break
            # Treat a drop as a pending attempt, so commands issued now wait for the reconnect.
            self._attempting = True
            self._last_error = TransportLost(self.name, "connection lost")
            self.link.mark_down("connection lost; reconnecting")
            self._notify()
            await asyncio.sleep(self._delay(0))

    def _ensure_supervisor(self) -> None:
        if self._closing:
            raise HostError(self.name, "transport is closed")
        if self._supervisor is None or self._supervisor.done():
            self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh-supervisor-{self.name}")

    async def connection(self, *, wait: bool = False) -> asyncssh.SSHClientConnection:
        """The live connection, connecting if needed.

        Args:
            wait: wait for as long as it takes for the host to come back (streams resuming after a
                drop); otherwise fail fast while the host is down.

        Raises:
            HostError: the host is down (naming why), or HostKeyRefused.
        """
        self._ensure_supervisor()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.connect_timeout_s + 2.0
        while True:
            conn = self._conn
            if conn is not None and not conn.is_closed():
                return conn
            if self._closing:
                raise HostError(self.name, "transport is closed")
            if not wait and not self._attempting and self._last_error is not None:
                # a fresh exception each time: re-raising one object would grow its traceback
                err = self._last_error
                raise type(err)(self.name, str(err).removeprefix(f"{self.name}: "))
            changed = self._changed
            if wait:
                await changed.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise HostError(self.name, f"SSH connect to {self.target} timed out")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await changed.wait()

    async def start(self) -> None:
        """Begin connecting in the background (the UI shows the link state meanwhile)."""
        self._ensure_supervisor()

    async def drop(self) -> None:
        """Close the current connection as if it had dropped (the supervisor reconnects)."""
        if self._conn is not None:
            self._conn.abort()

    @property
    def local_port(self) -> int | None:
        """The client-side TCP port of the live connection (tests find the server's session by it)."""
        conn = self._conn
        if conn is None:
            return None
        sockname = conn.get_extra_info("sockname")
        return sockname[1] if sockname else None

    async def close(self) -> None:
        """Close the connection and stop reconnecting."""
        self._closing = True
        self._notify()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await conn.wait_closed()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(BaseException):
                await self._supervisor
