"""The diagnostic tools of a simulated host (Host.tools): its engines are this machine's processes, so
`ps` and `py-spy` are this machine's; `nvidia-smi` is the stand-in over the host's GPU ledger."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from console.domain.values import CommandResult
from console.hosts.local import LocalTransport
from console.sim.ledger import LEDGER_ENV


def _py_spy() -> str:
    """py-spy on PATH, else beside this Python (a virtual environment's bin/, not always on PATH)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.exists() else "py-spy")


class SimTools(LocalTransport):
    """Runs tools locally; `nvidia-smi` becomes `python -m console.sim.nvidia_smi` on the host's ledger."""

    def __init__(self, name: str, ledger_dir: Path) -> None:
        super().__init__(name, env={LEDGER_ENV: str(ledger_dir)})

    @staticmethod
    def _mapped(argv: Sequence[str]) -> list[str]:
        args = list(argv)
        if args and args[0] == "nvidia-smi":
            return [sys.executable, "-m", "console.sim.nvidia_smi", *args[1:]]
        if args and args[0] == "py-spy":
            return [_py_spy(), *args[1:]]
        return args

    async def run(self, argv: Sequence[str], *, input: str | None = None,
                  timeout_s: float | None = None) -> CommandResult:
        return await super().run(self._mapped(argv), input=input, timeout_s=timeout_s)
