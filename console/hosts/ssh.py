"""One persistent SSH connection per host, shared by every pane and command.

A supervisor task owns the connection: it connects (honouring ~/.ssh/config or the host's
ssh_config, known_hosts and ssh-agent), waits for the connection to close, and reconnects with
jittered exponential backoff, keeping the Host's LinkStatus current. Commands fail fast while the
host is down; streams that were running wait for the connection to come back and raise
`TransportLost`, so callers resume where they were (the journal resumes from its cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import AsyncIterator, Sequence

import asyncssh

from console.config import HostConfig
from console.domain.models import CommandResult
from console.errors import HostError
from console.hosts.argv import CommandFailed, LineSplitter, TransportLost, quote_argv
from console.hosts.base import LinkStatus
from console.hosts.hostkeys import HostKeyJudge, HostKeyRefused, JudgingClient, known_hosts_files

# Timeouts here use `asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11, wait_for swallows a
# cancel that arrives in the loop iteration where its command finishes, so a poller cancelled at that
# moment (the switch watch's unit-state poll, as a start is decided) would run on forever.
_READ_CHUNK = 1 << 16
_STDERR_TAIL = 4096
#: OpenSSH allows 10 sessions per connection (MaxSessions); keep one spare.
MAX_RUNS = 3
MAX_STREAMS = 6
#: sshd frees a closed session only after the whole batch of packets that closed it, so an open sent
#: as other channels close can be refused for MaxSessions although they are gone (three short
#: commands ending together and three more starting). Nothing ran then: retry after these pauses.
_OPEN_RETRY_PAUSES_S = (0.05, 0.1, 0.2, 0.4, 0.8)


def describe_error(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class SshTransport:
    """Runs argv lists on one host over a shared, self-healing asyncssh connection."""

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
        self._run_slots = asyncio.Semaphore(MAX_RUNS)
        self._streams_open = 0

    # -- connection -------------------------------------------------------------------------------

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

    # -- commands ---------------------------------------------------------------------------------

    async def run(
        self, argv: Sequence[str], *, input: str | None = None, timeout_s: float | None = None
    ) -> CommandResult:
        """Run a command to completion over the shared connection.

        Raises:
            HostError: host down, channel refused, or timeout; TransportLost if the connection
                dropped while it ran (its effect on the host is then unknown).
        """
        cmd = quote_argv(argv)
        args = tuple(argv)
        async with self._run_slots:
            proc = await self._open_channel(cmd, args)
            try:
                # stdin always ends (empty when there is no input), as with LocalTransport's
                # /dev/null: a command that reads stdin must never wait for the console.
                if input:
                    proc.stdin.write(input.encode())
                proc.stdin.write_eof()
                async with asyncio.timeout(timeout_s):
                    out, err = await proc.communicate()
            except TimeoutError:
                proc.close()
                raise HostError(self.name, f"{args[0]} timed out after {timeout_s:g} s") from None
            except (OSError, asyncssh.Error) as exc:
                proc.close()
                raise TransportLost(
                    self.name, f"connection lost during {args[0]}: {describe_error(exc)}"
                ) from None
        if proc.exit_status is None and proc.exit_signal is None:
            raise TransportLost(self.name, f"connection lost during {args[0]}")
        self.link.mark_up()
        return CommandResult(
            argv=args,
            exit_status=proc.returncode,
            stdout=(out or b"").decode("utf-8", "replace"),
            stderr=(err or b"").decode("utf-8", "replace"),
        )

    async def _open_channel(self, cmd: str, args: tuple[str, ...]) -> asyncssh.SSHClientProcess:
        # A connection that died unnoticed fails at channel open, before the command ran: safe to
        # wait for the reconnect and try once more.
        for attempt in (1, 2):
            conn = await self.connection()
            try:
                return await _create_process(conn, cmd)
            except (OSError, asyncssh.Error) as exc:
                if not conn.is_closed() and isinstance(exc, asyncssh.ChannelOpenError):
                    raise HostError(self.name, f"cannot open an SSH channel: {describe_error(exc)}") from None
                if attempt == 2:
                    raise TransportLost(
                        self.name, f"connection lost starting {args[0]}: {describe_error(exc)}"
                    ) from None
                conn.abort()
                await asyncio.sleep(0)
        raise AssertionError("unreachable")

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[str]:
        """Yield stdout lines of a long-lived command on its own channel; closing the iterator
        closes the channel (sshd refuses signals for root sessions, but the command sees EOF/EPIPE).

        Raises:
            TransportLost: the connection dropped; call again to resume (it waits for the reconnect).
            CommandFailed: the command exited non-zero.
            HostError: too many long-lived channels on this host, or the host is down.
        """
        cmd = quote_argv(argv)
        args = tuple(argv)
        if self._streams_open >= MAX_STREAMS:
            raise HostError(self.name, f"too many long-lived SSH channels (limit {MAX_STREAMS})")
        self._streams_open += 1
        proc: asyncssh.SSHClientProcess | None = None
        err_task: asyncio.Task[None] | None = None
        try:
            conn = await self.connection(wait=self._ever_connected)
            try:
                proc = await _create_process(conn, cmd)
            except asyncssh.ChannelOpenError as exc:
                if conn.is_closed():
                    raise TransportLost(self.name, f"connection lost starting {args[0]}") from None
                raise HostError(self.name, f"cannot open an SSH channel: {describe_error(exc)}") from None
            except (OSError, asyncssh.Error) as exc:
                raise TransportLost(
                    self.name, f"connection lost starting {args[0]}: {describe_error(exc)}"
                ) from None
            stderr_tail = bytearray()
            err_task = asyncio.create_task(_drain(proc.stderr, stderr_tail))
            splitter = LineSplitter(max_line_bytes=8 << 20)
            try:
                while chunk := await proc.stdout.read(_READ_CHUNK):
                    self.link.mark_up()
                    for line in splitter.feed(chunk):
                        yield line
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5.0):
                        await proc.wait_closed()
            except (OSError, asyncssh.Error) as exc:
                raise TransportLost(
                    self.name, f"connection lost during {args[0]}: {describe_error(exc)}"
                ) from None
            if proc.exit_status is None and proc.exit_signal is None:
                raise TransportLost(self.name, f"connection lost during {args[0]}")
            for line in splitter.flush():
                yield line
            if proc.returncode != 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await err_task
                result = CommandResult(args, proc.returncode, stderr=stderr_tail.decode("utf-8", "replace"))
                raise CommandFailed(self.name, result)
        finally:
            self._streams_open -= 1
            if err_task is not None:
                err_task.cancel()
            if proc is not None:
                proc.close()


async def _create_process(conn: asyncssh.SSHClientConnection, cmd: str) -> asyncssh.SSHClientProcess:
    """Open a session channel running `cmd`, retrying a refused open while the connection lives."""
    for pause_s in _OPEN_RETRY_PAUSES_S:
        try:
            return await conn.create_process(cmd, encoding=None)
        except asyncssh.ChannelOpenError:
            if conn.is_closed():
                raise
        await asyncio.sleep(pause_s)
    return await conn.create_process(cmd, encoding=None)


async def _drain(reader: asyncssh.SSHReader[bytes], tail: bytearray) -> None:
    with contextlib.suppress(OSError, asyncssh.Error):
        while chunk := await reader.read(_READ_CHUNK):
            tail.extend(chunk)
            del tail[:-_STDERR_TAIL]
