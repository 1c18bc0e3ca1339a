"""The machine the console runs on, behind the same Transport protocol as SSH hosts."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence

from console.domain.values import CommandResult
from console.errors import HostError
from console.hosts.argv import CommandFailed, LineSplitter, check_argv

_READ_CHUNK = 1 << 16
_STDERR_TAIL = 4096


def _not_found(argv: tuple[str, ...], exc: OSError) -> CommandResult:
    # What a shell would report, so callers treat "missing tool" alike on local and SSH hosts.
    return CommandResult(argv=argv, exit_status=127, stderr=f"{argv[0]}: {exc.strerror or exc}")


class LocalTransport:
    """Runs argv lists as local child processes (no shell)."""

    def __init__(self, name: str = "localhost", *, env: Mapping[str, str] | None = None) -> None:
        """`env`: variables set for every command, over this process's own (None: its own alone)."""
        self.name = name
        self.env = None if env is None else {**os.environ, **env}

    async def run(
        self, argv: Sequence[str], *, input: str | None = None, timeout_s: float | None = None
    ) -> CommandResult:
        """Run a command to completion.

        Raises:
            HostError: when it runs longer than `timeout_s` (it is killed).
        """
        args = check_argv(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
            )
        except OSError as exc:
            return _not_found(args, exc)
        data = input.encode() if input is not None else None
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel from outside.
            async with asyncio.timeout(timeout_s):
                out, err = await proc.communicate(data)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise HostError(self.name, f"{args[0]} timed out after {timeout_s:g} s") from None
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # a cancelled caller leaves no command behind
            raise
        return CommandResult(
            argv=args,
            exit_status=proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
        )

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[str]:
        """Yield the stdout lines of a long-lived command; closing the iterator stops it.

        stdin stays open (and empty) while the command runs, so `cat`-style holders keep running
        until the iterator is closed.

        Raises:
            CommandFailed: when the command exits non-zero.
        """
        args = check_argv(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
            )
        except OSError as exc:
            raise CommandFailed(self.name, _not_found(args, exc)) from None
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        stderr_tail = bytearray()

        async def collect_stderr() -> None:
            assert proc.stderr is not None
            while chunk := await proc.stderr.read(_READ_CHUNK):
                stderr_tail.extend(chunk)
                del stderr_tail[:-_STDERR_TAIL]

        err_task = asyncio.create_task(collect_stderr())
        splitter = LineSplitter(max_line_bytes=8 << 20)
        try:
            while chunk := await proc.stdout.read(_READ_CHUNK):
                for line in splitter.feed(chunk):
                    yield line
            for line in splitter.flush():
                yield line
            status = await proc.wait()
            await err_task
            if status != 0:
                raise CommandFailed(
                    self.name,
                    CommandResult(args, status, stderr=stderr_tail.decode("utf-8", "replace")),
                )
        finally:
            await _stop(proc)
            err_task.cancel()

    async def close(self) -> None:
        """Nothing to release: every process is owned by the call that started it."""


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin first (lets `cat` holders exit cleanly), then terminate, then kill."""
    if proc.returncode is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    for signal_fn, wait_s in ((None, 0.2), (proc.terminate, 1.0), (proc.kill, 5.0)):
        if signal_fn is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_fn()
        try:
            async with asyncio.timeout(wait_s):
                await asyncio.shield(proc.wait())
            return
        except TimeoutError:
            continue
