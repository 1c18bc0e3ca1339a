"""Fan-out: one status cycle (unit state + GPU sample) for every test host, persistent SSH connections
versus the story's way (one new `ssh` process per command), side by side in one run.

    .venv/bin/python bench/fanout.py            # 8 hosts, 15 cycles each way
    SERVE_CONSOLE_FANOUT_HOSTS=4 SERVE_CONSOLE_FANOUT_CYCLES=5 .venv/bin/python bench/fanout.py

Boots the test hosts with tests/hosts/testbed.sh when fewer than N are up (and tears down what it
booted). Both ways run the same commands with the same concurrency (every command of every host at
once), so the difference is the connection cost alone. Cycles alternate between the two ways, so
machine load hits both alike. The last line is one JSON object.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testbed_lock import hold_session_lock, testbed_dir  # noqa: E402

from console.config import HostConfig  # noqa: E402
from console.hosts.gpus.nvidia_smi import QUERY_APPS, QUERY_GPU  # noqa: E402
from console.hosts.remote import build_remote_host  # noqa: E402
from console.hosts.systemd.parse import SHOW_PROPERTIES  # noqa: E402

TESTBED_SH = REPO / "tests" / "hosts" / "testbed.sh"
UNIT = "sglang-k26-ep8.service"
STATE_ARGV = ["systemctl", "show", "-p", ",".join(SHOW_PROPERTIES), "--timestamp=unix", UNIT]


def session_lock(timeout_s: float = 900.0) -> contextlib.AbstractContextManager[None]:
    """Hold the testbed like a pytest session does, so nobody tears the hosts down under us."""
    return hold_session_lock(timeout_s, lambda why: sys.exit(f"fanout: {why}"))


def testbed(*args: str) -> None:
    env = {**os.environ, "SERVE_CONSOLE_TESTBED_LOCKED": "1"}
    proc = subprocess.run(["bash", str(TESTBED_SH), *args], capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        sys.exit(f"fanout: testbed.sh {' '.join(args)} failed:\n{tail}")


def hosts_up(count: int) -> list[str] | None:
    """Names of the first `count` test hosts if that many are up and answer ssh, else None."""
    try:
        doc = json.loads((testbed_dir() / "hosts.json").read_text())
    except (OSError, ValueError):
        return None
    names = [h["name"] for h in doc.get("hosts", [])][:count]
    if len(names) < count:
        return None
    for name in names:
        probe = subprocess.run(
            ["ssh", "-n", "-F", str(testbed_dir() / "ssh_config"), "-o", "ConnectTimeout=2", name, "true"],
            capture_output=True,
        )
        if probe.returncode != 0:
            return None
    return names


async def ssh_process_cycle(names: list[str]) -> float:
    """The story's way: a fresh `ssh` (TCP + key exchange + auth) for each command."""
    config = str(testbed_dir() / "ssh_config")

    async def one(name: str, argv: list[str]) -> None:
        proc = await asyncio.create_subprocess_exec(
            "ssh", "-n", "-F", config, "-o", "ControlMaster=no", "-o", "ControlPath=none", name, "--",
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: {' '.join(argv[:2])} failed: {err.decode().strip()[-200:]}")

    started = time.perf_counter()
    await asyncio.gather(*(one(n, argv) for n in names for argv in (STATE_ARGV, QUERY_GPU, QUERY_APPS)))
    return time.perf_counter() - started


async def command_cycle(hosts: list) -> float:
    """Persistent connections, but the GPU sample by command (a fresh nvidia-smi run per cycle)."""
    started = time.perf_counter()
    results = await asyncio.gather(*(h.services.state(UNIT) for h in hosts), *(h.gpus.sample() for h in hosts))
    elapsed = time.perf_counter() - started
    for snapshot in results[len(hosts) :]:
        if snapshot.error or not snapshot.gpus:
            raise RuntimeError(f"GPU sample failed: {snapshot.error}")
    return elapsed


async def console_cycle(hosts: list, latest: dict) -> tuple[float, float]:
    """The console's way: unit state over the persistent connection, GPUs from the host's long-lived
    `nvidia-smi -lms` stream (no process per sample). Returns (cycle seconds, oldest GPU sample age)."""
    started = time.perf_counter()
    await asyncio.gather(*(h.services.state(UNIT) for h in hosts))
    snapshots = [latest[h.name] for h in hosts]
    elapsed = time.perf_counter() - started
    for snapshot in snapshots:
        if snapshot.error or not snapshot.gpus:
            raise RuntimeError(f"GPU stream failed: {snapshot.error}")
    return elapsed, max(time.time() - s.taken_at for s in snapshots)


async def measure(names: list[str], cycles: int, interval_s: float) -> dict[str, list[float]]:
    config = testbed_dir() / "ssh_config"
    hosts = [build_remote_host(HostConfig(name=n, ssh_config=str(config), gpus="nvidia-smi")) for n in names]
    latest: dict = {}
    all_streaming = asyncio.Event()

    async def follow(host) -> None:
        async for snapshot in host.gpus.stream(interval_s):
            latest[host.name] = snapshot
            if len(latest) == len(hosts):
                all_streaming.set()

    streams = [asyncio.create_task(follow(h)) for h in hosts]
    try:
        await command_cycle(hosts)  # connect once; connections then persist
        await ssh_process_cycle(names)  # warm caches alike
        await asyncio.wait_for(all_streaming.wait(), 30)
        out: dict[str, list[float]] = {"console": [], "age": [], "command": [], "ssh": []}
        for _ in range(cycles):
            cycle_s, age_s = await console_cycle(hosts, latest)
            out["console"].append(cycle_s)
            out["age"].append(age_s)
            out["command"].append(await command_cycle(hosts))
            out["ssh"].append(await ssh_process_cycle(names))
        return out
    finally:
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        for h in hosts:
            await h.close()


def _line(label: str, values: list[float]) -> str:
    return (
        f"  {label:<44} median {statistics.median(values) * 1000:8.1f} ms"
        f"  (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"
    )


def main() -> int:
    count = int(os.environ.get("SERVE_CONSOLE_FANOUT_HOSTS", "8"))
    cycles = int(os.environ.get("SERVE_CONSOLE_FANOUT_CYCLES", "15"))
    interval_s = float(os.environ.get("SERVE_CONSOLE_FANOUT_GPU_INTERVAL_S", "0.5"))
    with session_lock():
        names = hosts_up(count)
        booted = False
        if names is None:
            print(f"fanout: booting {count} test hosts (tests/hosts/testbed.sh up {count})", file=sys.stderr)
            testbed("up", str(count))
            booted = True
            names = hosts_up(count)
            if names is None:
                sys.exit("fanout: the test hosts did not come up")
        try:
            runs = asyncio.run(measure(names, cycles, interval_s))
        finally:
            if booted and os.environ.get("SERVE_CONSOLE_FANOUT_KEEP") != "1":
                testbed("down")
    console_med = statistics.median(runs["console"])
    command_med = statistics.median(runs["command"])
    ssh_med = statistics.median(runs["ssh"])
    ratio = ssh_med / console_med if console_med > 0 else float("inf")
    print(f"fan-out over {len(names)} hosts: unit state + GPU sample (GPUs and processes) per host, {cycles} cycles each way")
    print(_line("persistent, GPUs from the -lms stream", runs["console"]))
    print(_line("persistent, nvidia-smi run per cycle", runs["command"]))
    print(_line("seed: one new ssh process per command", runs["ssh"]))
    print(f"  GPU samples used by the console were at most {max(runs['age']) * 1000:.0f} ms old (stream interval {interval_s:g} s)")
    print(f"  ratio (seed / console): {ratio:.1f}x; with nvidia-smi run per cycle: {ssh_med / command_med:.1f}x")
    print(json.dumps({
        "bench": "fanout", "hosts": len(names), "cycles": cycles,
        "console_median_s": round(console_med, 4), "persistent_command_median_s": round(command_med, 4),
        "ssh_per_command_median_s": round(ssh_med, 4), "ratio": round(ratio, 1),
        "ratio_command_gpus": round(ssh_med / command_med, 1), "gpu_sample_max_age_s": round(max(runs["age"]), 3),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
