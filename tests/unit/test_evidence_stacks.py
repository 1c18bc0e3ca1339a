"""The stacks part without a live engine: which processes are an engine's, and what py-spy's refusals
say. The refusal texts are py-spy's own, verbatim: benfred/py-spy#459 (in a container without
SYS_PTRACE, as root), benfred/py-spy#12 (not root), benfred/py-spy#612 (`Operation not permitted`)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from console.config import ServiceConfig
from console.domain.values import CommandResult, Engine, UnitState
from console.ops.evidence.parts import Unavailable, descendants, stacks_text

PS = """\
      1       0 /sbin/init
   4242       1 python3 -m vllm.entrypoints.openai.api_server --model m
   4250    4242 VLLM::EngineCore
   4251    4250 VLLM::Worker_TP0
   4252    4250 VLLM::Worker_TP1
   5000       1 sshd: ops [priv]
"""
IN_DOCKER = ("Permission Denied\n\nIt looks like you are running in a docker container. Please make sure you "
             "started your container with the SYS_PTRACE capability. See "
             "https://github.com/benfred/py-spy#how-do-i-run-py-spy-in-docker for more details\n")
NOT_ROOT = "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'\n"
EPERM = "Error: Operation not permitted (os error 1)\nReason: Operation not permitted (os error 1)\n"


class Tools:
    """A host's tools that answer `ps` with PS and py-spy as told."""

    name = "gpu-node-1"

    def __init__(self, spy: CommandResult) -> None:
        self.spy = spy
        self.calls: list[tuple[str, ...]] = []

    async def run(self, argv: Sequence[str], *, input: str | None = None,
                  timeout_s: float | None = None) -> CommandResult:
        self.calls.append(tuple(argv))
        if argv[0] == "ps":
            return CommandResult(tuple(argv), 0, stdout=PS)
        return CommandResult(tuple(argv), self.spy.exit_status, self.spy.stdout, self.spy.stderr)


class Node:
    name = "gpu-node-1"
    transport = None

    def __init__(self, tools: Tools) -> None:
        self.tools = tools


SERVICE = ServiceConfig(name="qwen3", engine=Engine.VLLM, url="http://127.0.0.1:8000")
RUNNING = [UnitState(unit="vllm.service", active="active", sub="running", main_pid=4242, since=1.0)]


def test_an_engines_processes_are_its_main_process_and_every_one_below_it() -> None:
    assert [pid for pid, _ in descendants(PS, [4242])] == [4242, 4250, 4251, 4252]
    assert descendants(PS, [9999]) == []


@pytest.mark.parametrize("text", [IN_DOCKER, NOT_ROOT, EPERM])
async def test_py_spys_refusal_is_the_reason_there_are_no_stacks(text: str) -> None:
    tools = Tools(CommandResult(("py-spy",), 1, stderr=text))
    with pytest.raises(Unavailable) as refused:
        await stacks_text(Node(tools), SERVICE, RUNNING)  # type: ignore[arg-type]
    why = str(refused.value)
    assert why.startswith("py-spy on gpu-node-1 could not read pid 4242: ")
    assert text.split("\n")[0].strip() in why and "\n" not in why
    spied = [c for c in tools.calls if c[0] == "py-spy"]
    assert len(spied) == 4 and all("--native" in c for c in spied)  # refused: not asked again without it


async def test_no_py_spy_on_the_host_is_said_so() -> None:
    tools = Tools(CommandResult(("py-spy",), 127, stderr="bash: line 1: py-spy: command not found\n"))
    with pytest.raises(Unavailable, match=r"^py-spy not installed on gpu-node-1$"):
        await stacks_text(Node(tools), SERVICE, RUNNING)  # type: ignore[arg-type]


async def test_native_failing_alone_falls_back_to_python_frames() -> None:
    class NoNative(Tools):
        async def run(self, argv, *, input=None, timeout_s=None):  # type: ignore[no-untyped-def]
            if argv[0] == "py-spy" and "--native" in argv:
                self.calls.append(tuple(argv))
                return CommandResult(tuple(argv), 1, stderr="Error: Failed to get native stack trace\n")
            if argv[0] == "py-spy":
                self.calls.append(tuple(argv))
                return CommandResult(tuple(argv), 0, stdout=f"Thread {argv[3]} (idle): \"MainThread\"\n")
            return await super().run(argv, input=input, timeout_s=timeout_s)

    text = await stacks_text(Node(NoNative(CommandResult((), 0))), SERVICE, RUNNING)  # type: ignore[arg-type]
    assert "=== pid 4250: VLLM::EngineCore" in text and 'Thread 4250 (idle): "MainThread"' in text
    assert "(--native failed: Error: Failed to get native stack trace)" in text
