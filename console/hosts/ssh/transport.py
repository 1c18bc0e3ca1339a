"""Commands and streams on one host, over channels of its one persistent SSH connection.

`SshTransport` is the transport the Host uses: an `SshConnection` (console.hosts.ssh.connection,
which connects and reconnects) plus what runs over it, within OpenSSH's per-connection session
budget. Commands fail fast while the host is down; streams that were running wait for the
connection to come back and raise `TransportLost`, so callers resume where they were (the journal
resumes from its cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import asyncssh

from console.config import HostConfig
from console.domain.values import CommandResult
from console.errors import HostError
from console.hosts.argv import CommandFailed, LineSplitter, TransportLost, quote_argv
from console.hosts.base import LinkStatus
from console.hosts.ssh.connection import SshConnection, describe_error

__all__ = ["MAX_RUNS", "MAX_STREAMS", "SshTransport", "describe_error"]

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


class SshTransport(SshConnection):
    """Runs argv lists on one host over a shared, self-healing asyncssh connection.

    Args:
        cfg: the host.
        link: the LinkStatus to keep current (a fresh one when none is given).
        **timing: the keepalive and backoff settings, by the names `SshConnection` takes.
    """

    def __init__(self, cfg: HostConfig, link: LinkStatus | None = None, **timing: float) -> None:
        super().__init__(cfg, link, **timing)
        self._run_slots = asyncio.Semaphore(MAX_RUNS)
        self._streams_open = 0

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
