"""The two-host services bench/dead_rank.py measures on: simulated hosts on this machine, and two test hosts
over SSH (booted with tests/hosts/testbed.sh under the testbed's session lock, torn down at the end)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from sim_fixtures import free_port  # noqa: E402
from testbed_lock import hold_session_lock, testbed_dir  # noqa: E402

from console.config import parse_config  # noqa: E402
from console.factory import open_hosts  # noqa: E402
from console.ops.switch import stop_service  # noqa: E402

UNIT = "sglang-ds3@tp16.service"
MODEL = REPO / "console" / "sim" / "models" / "deepseek-ai--DeepSeek-V3.json"
LAYOUTS = 'layouts = [{ name = "TP16", args = "--tp-size 16", nodes = 2 }]\n'
SIM_CONFIG = """
[hosts.demo-a]
transport = "sim"
gpus = "sim"
time_scale = 0.05
[hosts.demo-a.sim]
gpu_count = 8
gpu_total_mib = 97887
[hosts.demo-b]
transport = "sim"
gpus = "sim"
time_scale = 0.05
[hosts.demo-b.sim]
gpu_count = 8
gpu_total_mib = 97887
[hosts.demo-a.services.ds3]
engine = "sglang"
url = "http://127.0.0.1:{port}"
template = "sglang-ds3@.service"
model_config = "{model}"
nodes = ["demo-a", "demo-b"]
dist_port = {dist}
ras_port = {ras}
"""
TESTBED_CONFIG = """
[hosts.tb1]
ssh_config = "{ssh_config}"
gpus = "none"
[hosts.tb2]
ssh_config = "{ssh_config}"
gpus = "none"
[hosts.tb1.services.ds3]
engine = "sglang"
url = "http://127.0.0.1:30000"
template = "sglang-ds3@.service"
nodes = ["tb1", "tb2"]
head_address = "{head}"
nic = "cl0"
"""


class Target:
    """A two-host service: its head Host, the service, and how the worker's engine gets a signal."""

    name = "?"

    def __init__(self, hosts: list) -> None:
        self.hosts = hosts
        self.head, self.worker = hosts
        self.service = self.head.config.services[0]

    async def worker_pid(self) -> int:
        return (await self.worker.services.state(UNIT)).main_pid

    async def signal_worker(self, name: str) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.service.name} TP16 over {self.head.name} and {self.worker.name}"

    async def stop(self) -> None:
        await stop_service(self.head, self.service)

    async def close(self) -> None:
        for host in self.hosts:
            await host.close()


class SimTarget(Target):
    name = "sim"

    @classmethod
    async def open(cls, state_dir: Path) -> SimTarget:
        text = SIM_CONFIG.format(port=free_port(), model=MODEL, dist=free_port(), ras=free_port()) + LAYOUTS
        config = parse_config(text.encode(), "hosts.toml", base_dir=state_dir)
        return cls(open_hosts(config, state_dir=state_dir))

    async def signal_worker(self, name: str) -> None:
        os.kill(await self.worker_pid(), getattr(signal, name))

    def describe(self) -> str:
        return super().describe() + " (simulated hosts on this machine, time scale 0.05)"

    async def close(self) -> None:
        for host in self.hosts:
            await host.services.stop_all()
        await super().close()


class TestbedTarget(Target):
    name = "testbed"

    def __init__(self, hosts: list, held: contextlib.ExitStack) -> None:
        super().__init__(hosts)
        self.held = held

    @classmethod
    async def open(cls, state_dir: Path) -> TestbedTarget | str:
        if os.geteuid() != 0:
            return "booting the test hosts needs root"
        held = contextlib.ExitStack()
        held.enter_context(hold_session_lock(1800, lambda why: sys.exit(f"bench: {why}")))
        held.callback(_testbed, "down")
        _testbed("up", "2")
        doc = json.loads((testbed_dir() / "hosts.json").read_text())
        head = next(h["cluster_address"] for h in doc["hosts"] if h["name"] == "tb1")
        text = TESTBED_CONFIG.format(ssh_config=testbed_dir() / "ssh_config", head=head) + LAYOUTS
        config = parse_config(text.encode(), "hosts.toml", base_dir=state_dir)
        return cls(open_hosts(config), held)

    async def signal_worker(self, name: str) -> None:
        pid = await self.worker_pid()
        _ssh("tb2", f"kill -s {name.removeprefix('SIG')} {pid}")

    def describe(self) -> str:
        return super().describe() + " (test hosts tb1, tb2 over SSH, cluster network 10.232.0.0/24)"

    async def close(self) -> None:
        try:
            await super().close()
            for name in ("tb2", "tb1"):
                _ssh(name, f"systemctl kill -s CONT {UNIT}; systemctl stop {UNIT}", check=False)
        finally:
            self.held.close()


def _testbed(*args: str) -> None:
    env = {**os.environ, "SERVE_CONSOLE_TESTBED_LOCKED": "1"}
    proc = subprocess.run(["bash", str(REPO / "tests" / "hosts" / "testbed.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=900)  # fmt: skip
    if proc.returncode != 0:
        sys.exit(f"bench: testbed.sh {' '.join(args)} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")


def _ssh(host: str, command: str, *, check: bool = True) -> None:
    subprocess.run(["ssh", "-n", "-F", str(testbed_dir() / "ssh_config"), host, command], capture_output=True,
                   text=True, check=check, timeout=60)  # fmt: skip
