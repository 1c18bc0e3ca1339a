"""A real vLLM on one test host, for the benchmarks that measure the console against it.

Boots test host tb1 with tests/hosts/testbed.sh (holding the testbed's session lock, as a pytest session
does), checks that tests/hosts/vllm/install.sh has built the vLLM venv and the tiny models the host binds,
and writes a hosts.toml whose service `tiny` runs `vllm-tiny@LAYOUT.service` there over SSH. Everything it
booted is torn down again when the block ends, a failure or Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from testbed_lock import hold_session_lock, testbed_dir  # noqa: E402

TESTBED_SH = REPO / "tests" / "hosts" / "testbed.sh"
HOST = "tb1"
HOST_ADDRESS = "10.231.1.2"  # tb1's own address, as testbed.sh gives it
MODEL = "/opt/models/vllm-tiny/tiny-moe"
#: The layouts the bench config names: the unit that runs each on the host, and its parallelism.
LAYOUTS = {"TP1": ("vllm-tiny@tp1.service", "tp = 1"),
           "TP1OPEN": ("vllm-tiny@tp1-open.service", "tp = 1"),
           "LONGCTX": ("vllm-tiny@max-model-len.service", "tp = 1"),
           "SMALLKV": ("vllm-tiny@kv-too-small.service", "tp = 1"),
           "PP2": ("vllm-tiny@pp2.service", "pp = 2")}  # fmt: skip


def vllm_venv() -> Path:
    return testbed_dir() / "vllm" / "venv"


def local_model_dir() -> Path:
    """The tiny model as built on this machine (the host binds the same directory)."""
    return testbed_dir() / "vllm" / "models" / "tiny-moe"


def _testbed(*args: str) -> None:
    env = {**os.environ, "SERVE_CONSOLE_TESTBED_LOCKED": "1"}
    proc = subprocess.run(["bash", str(TESTBED_SH), *args], capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        sys.exit(f"bench: testbed.sh {' '.join(args)} failed:\n{tail}")


def hosts_toml(path: Path, *, url: str = "http://127.0.0.1:8000", health_via: str = "ssh") -> Path:
    """A hosts.toml for the bench: tb1 over SSH, GPU-less (`gpus = "none"`: no fit verdict to refuse on).

    The service's URL is the engine's on the host, through the SSH connection (the default), or the
    host's own address with `health_via = "direct"` for a benchmark that must not measure a tunnel.
    """
    state = testbed_dir()
    layouts = "".join(
        f'\n[[hosts.{HOST}.services.tiny.layouts]]\nname = "{name}"\nunit = "{unit}"\n{shape}\n'
        for name, (unit, shape) in LAYOUTS.items()
    )
    path.write_text(
        f'[hosts.{HOST}]\nssh_config = "{state / "ssh_config"}"\ngpus = "none"\n\n'
        f'[hosts.{HOST}.services.tiny]\nengine = "vllm"\nurl = "{url}"\nhealth_via = "{health_via}"\n'
        + layouts
    )
    return path


@contextlib.contextmanager
def real_vllm_host(tmp: Path, **service: str) -> Iterator[Path]:
    """Test host tb1 up with the real vLLM's unit; yields the hosts.toml that reaches it (`service`: the
    URL and health_via of `hosts_toml`)."""
    if not (vllm_venv() / "bin" / "vllm-cli").exists() or not (local_model_dir() / "config.json").exists():
        sys.exit("bench: the real vLLM is not installed: run tests/hosts/vllm/install.sh first (as root)")
    with hold_session_lock(1800, lambda why: sys.exit(f"bench: {why}")):
        _testbed("up", "1")
        try:
            doc = json.loads((testbed_dir() / "hosts.json").read_text())
            assert any(h["name"] == HOST for h in doc["hosts"]), doc
            yield hosts_toml(tmp / "hosts.toml", **service)
        finally:
            ssh("systemctl stop 'vllm-tiny@*'", check=False)
            _testbed("down")


def ssh(command: str, *, check: bool = True, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """A shell command on tb1, over the testbed's own ssh_config."""
    return subprocess.run(["ssh", "-n", "-F", str(testbed_dir() / "ssh_config"), HOST, command],
                          capture_output=True, text=True, check=check, timeout=timeout_s)  # fmt: skip


def serve_console(config: Path, *args: str, timeout_s: float = 600,
                  prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`serve-console ARGS --config CONFIG` as an operator runs it (`prefix`: e.g. `taskset -c 1`)."""
    argv = [*prefix, sys.executable, "-m", "console", *args, "--config", str(config)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=timeout_s)
