"""Real test hosts for the integration tests: systemd-nspawn containers booted by tests/hosts/testbed.sh.

Fixtures
- `testbed` (session): runs `testbed.sh down` then `testbed.sh up N` once per test session and always
  runs `down` at the end. N is env SERVE_CONSOLE_TESTBED_HOSTS (default 2). Skips with the reason when
  the hosts cannot boot (not root, no systemd-nspawn, boot failed); with SERVE_CONSOLE_REQUIRE_TESTBED=1
  that skip is a failure instead.
- `clean_testbed` (function): the same `Testbed`, reset after the test with `Testbed.reset()`.

`Testbed` (what the fixture yields)
- `hosts`: tuple of `BedHost` (name "tb1".., index, address "10.231.I.2", machine_address, netns, veth,
  root = the host's root fs as seen from this machine, writable: files written there are on the host,
  cluster_address "10.232.0.I": the host's address on the cluster network, interface cl0, which only
  the hosts reach: a bridge in netns tbnet joins them; this machine has no route to 10.232.0.0/24).
- `ssh_config`, `known_hosts`, `identity`: Paths in .testbed/. Every host is a `Host tbI` entry of
  ssh_config (User root, the identity, StrictHostKeyChecking yes, that known_hosts), so
  `HostConfig(name="tb1", ssh_config=str(bed.ssh_config))` or `ssh -F ssh_config tb1` reach it.
  Users on each host: root; `operator` (same key, sudo only with a password); `deploy` (same key,
  passwordless sudo for systemctl and journalctl only).
- `host(name)` -> BedHost; `names` -> ["tb1", ...].
- `ssh(name, command, *, user=None, check=True, timeout_s=30, input=None)` -> CompletedProcess[str]:
  plain `ssh -F ssh_config [-l user] NAME -- command`; `command` is a remote shell string, or a list of
  words that is quoted with shlex.join.
- `write_file(name, path, text, mode=0o644)`: write a file on the host (through its root fs).
- `cut_network(name)` / `restore_network(name)`: `ip link set tbI-h down|up`; `network_cut(name)` is
  the same as a context manager.
- `drop_ssh_sessions(name)`: kill the host's per-connection sshd processes (not the listener), which
  drops every open connection to it, idle ones included.
- `stop_host(name, kill=False)`: power the host off (SIGTERM to nspawn, ~2 s) or SIGKILL it; its disk
  stays. `start_host(name)`: boot it again and wait until ssh answers.
- `replace_host_key(name)` -> the new public key line: the host gets a new ed25519 host key and sshd
  reloads; known_hosts keeps the old one, so strict clients refuse it. `restore_host_key(name)` undoes it.
- `reset(name=None)`: bring hosts back to the state after `up`: network up, host running, original
  host key, the engine and noisy units stopped and reset-failed, console-written env files (the
  ds3 node files too), drop-ins and sim.env removed.

Host contents: units sglang-k26-{tp8,pp8,ep8,tp4ep2}.service (unit per layout), sglang-k26@.service
(template, instances tp8/pp8/ep8/tp4ep2), sglang-k26.service (env-file mapping, reads
SERVE_CONSOLE_LAYOUT_ARGS from /etc/serve-console/sglang-k26.env), sglang-k26-dropin.service (drop-in
mapping, default SERVE_CONSOLE_LAYOUT_ARGS=--tp-size 8) and noisy.service (~2,000 journal lines/s).
sglang-ds3@.service: DeepSeek-V3 (/opt/models/deepseek-v3) over several hosts, instances tp16/pp2tp8/
ep16 (/etc/serve-console/ds3-layouts/), each node's place in /etc/serve-console/ds3.node.env
(SERVE_CONSOLE_NODE_ARGS="--nnodes 2 --node-rank R --dist-init-addr 10.232.0.1:5000"); it binds
0.0.0.0:30000 (the head's API; a worker's dummy /health) and NCCL RAS on 0.0.0.0:28028. Its vLLM twin
vllm-ds3@.service (same instances, /etc/serve-console/ds3-vllm-layouts/, node file
/etc/serve-console/ds3-vllm.node.env with --master-addr 10.232.0.1 --master-port 5000, --headless on
node 1) serves the API on 0.0.0.0:8000.
The one-host engine units listen on 127.0.0.1:30000; all read /etc/serve-console/sim.env (set
SERVE_CONSOLE_SIM_TIME_SCALE there; the units' default is --time-scale 0.05). `nvidia-smi` prints the
sim ledger in /var/lib/serve-console-sim/ledger (8 x 97887 MiB).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from testbed_lock import hold_session_lock, testbed_dir
from waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TESTBED_SH = REPO / "tests" / "hosts" / "testbed.sh"
SESSION_LOCK_WAIT_S = 1800  # a concurrent integration run on the same machine holds the hosts
TIMINGS: list[str] = []
UP_TIMEOUT_S = 600  # a cold build of the root fs takes 20-60 s; apt mirrors can be slow
# Undo what tests do to a host: running units, console-written layout files, the sim's pace.
_RESET_SCRIPT = """
systemctl stop 'sglang-k26*' 'sglang-ds3@*' 'vllm-ds3@*' noisy.service
rm -f /etc/serve-console/sglang-k26.env /etc/serve-console/sim.env /etc/serve-console/noisy.env \
    /etc/serve-console/ds3.node.env /etc/serve-console/ds3-vllm.node.env
rm -rf /etc/systemd/system/sglang-k26-dropin.service.d /etc/systemd/system/sglang-k26.service.d
systemctl daemon-reload
systemctl reset-failed
"""
_DROP_SESSIONS_SCRIPT = """
keep=" "; p=$$
while [ "$p" -gt 1 ]; do keep="$keep$p "; p=$(ps -o ppid= -p "$p" | tr -d ' '); done
for pid in $(pgrep -f '^sshd: '); do
    case "$(ps -o args= -p "$pid")" in *"[listener]"*) continue ;; esac
    case "$keep" in *" $pid "*) ;; *) kill -KILL "$pid" 2>/dev/null ;; esac
done
"""


@dataclass(frozen=True, slots=True)
class BedHost:
    """One booted test host."""

    name: str
    index: int
    address: str
    machine_address: str
    netns: str
    veth: str
    root: Path
    cluster_address: str | None = None
    """On the cluster network (cl0, 10.232.0.I/24), which joins the hosts only."""


class Testbed:
    """The running test hosts and the operations tests perform on them."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, state_dir: Path) -> None:
        doc = json.loads((state_dir / "hosts.json").read_text())
        self.dir = state_dir
        self.ssh_config = Path(doc["ssh_config"])
        self.known_hosts = Path(doc["known_hosts"])
        self.identity = Path(doc["identity"])
        self.hosts = tuple(
            BedHost(
                name=h["name"],
                index=int(h["name"][2:]),
                address=h["address"],
                machine_address=h["machine_address"],
                netns=h["netns"],
                veth=h["veth"],
                root=Path(h["root"]),
                cluster_address=h.get("cluster_address"),
            )
            for h in doc["hosts"]
        )
        self._saved_keys: dict[str, dict[str, bytes]] = {}

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> BedHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no test host {name!r} (have {', '.join(self.names)})")

    def ssh(
        self,
        name: str,
        command: str | list[str],
        *,
        user: str | None = None,
        check: bool = True,
        timeout_s: float = 30,
        input: str | None = None,
        extra_options: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` on host `name` with plain OpenSSH and the testbed's ssh_config."""
        self.host(name)
        remote = shlex.join(command) if isinstance(command, list) else command
        argv = ["ssh", "-F", str(self.ssh_config), *extra_options]
        if input is None:
            argv.append("-n")
        if user:
            argv += ["-l", user]
        argv += [name, "--", remote]
        return subprocess.run(
            argv, input=input, capture_output=True, text=True, check=check, timeout=timeout_s
        )

    def write_file(self, name: str, path: str, text: str, mode: int = 0o644) -> None:
        """Write `text` to the absolute `path` on host `name` (through its root fs on this machine)."""
        target = self.host(name).root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".testbed-tmp")
        tmp.write_text(text)
        tmp.chmod(mode)
        tmp.replace(target)

    def cut_network(self, name: str) -> None:
        """Take the machine side of the host's veth down: packets stop, connections hang."""
        subprocess.run(["ip", "link", "set", self.host(name).veth, "down"], check=True)

    def restore_network(self, name: str) -> None:
        subprocess.run(["ip", "link", "set", self.host(name).veth, "up"], check=True)

    @contextlib.contextmanager
    def network_cut(self, name: str) -> Iterator[None]:
        self.cut_network(name)
        try:
            yield
        finally:
            self.restore_network(name)

    def drop_ssh_sessions(self, name: str) -> None:
        """Kill every per-connection sshd process on the host (with or without open sessions), except
        the listener and this command's own; every open connection to the host drops."""
        self.ssh(name, _DROP_SESSIONS_SCRIPT)

    def stop_host(self, name: str, *, kill: bool = False) -> None:
        self.host(name)
        _testbed_sh("stop", name, *(["--kill"] if kill else []), timeout_s=60)

    def start_host(self, name: str) -> None:
        self.host(name)
        _testbed_sh("start", name, timeout_s=120)

    def is_running(self, name: str) -> bool:
        pid_file = self.dir / "hosts" / name / "pid"
        try:
            pid = int(pid_file.read_text())
            return Path(f"/proc/{pid}/comm").read_text().strip() == "systemd-nspawn"
        except (OSError, ValueError):
            return False

    def replace_host_key(self, name: str) -> str:
        """Give the host a new ed25519 host key (sshd reloads); return its public key line."""
        key = self.host(name).root / "etc/ssh/ssh_host_ed25519_key"
        pub = key.with_name(key.name + ".pub")
        self._saved_keys.setdefault(name, {"key": key.read_bytes(), "pub": pub.read_bytes()})
        self.ssh(
            name,
            "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub"
            " && ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key"
            " && systemctl reload ssh",
        )
        new_key = pub.read_text().strip()
        self._wait_host_key(name, new_key)
        return new_key

    def restore_host_key(self, name: str) -> None:
        saved = self._saved_keys.pop(name, None)
        if saved is None:
            return
        key = self.host(name).root / "etc/ssh/ssh_host_ed25519_key"
        key.write_bytes(saved["key"])
        key.chmod(0o600)
        key.with_name(key.name + ".pub").write_bytes(saved["pub"])
        # The host presents the new key until sshd reloads, so this one connection skips the check.
        self.ssh(
            name,
            "systemctl reload ssh",
            extra_options=("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"),
        )
        self._wait_host_key(name, saved["pub"].decode().strip())

    def _wait_host_key(self, name: str, pub_line: str, timeout_s: float = 30) -> None:
        """Wait until sshd, re-executed by a reload, serves the key `pub_line` again."""
        key_type, key_b64 = pub_line.split()[:2]

        def served() -> bool:
            scan = subprocess.run(
                ["ssh-keyscan", "-T", "2", "-t", key_type, self.host(name).address],
                capture_output=True,
                text=True,
            )
            return key_b64 in scan.stdout

        wait_for(served, f"{name} to serve host key {key_b64[:16]}...", timeout_s=timeout_s, interval_s=0.1)

    def reset(self, name: str | None = None) -> None:
        """Bring one host (or all) back to the state right after `up`."""
        for h in [self.host(name)] if name else list(self.hosts):
            self.restore_network(h.name)
            if not self.is_running(h.name):
                self.start_host(h.name)
            self.restore_host_key(h.name)
            self.ssh(h.name, _RESET_SCRIPT, timeout_s=60)


class TestbedUnavailable(Exception):
    """The hosts cannot boot here; the message says why."""


def _testbed_sh(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run testbed.sh; this session already holds session.lock (see `_session_lock`)."""
    proc = subprocess.run(
        ["bash", str(TESTBED_SH), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "SERVE_CONSOLE_TESTBED_LOCKED": "1"},
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise TestbedUnavailable(f"testbed.sh {' '.join(args)} failed (exit {proc.returncode}):\n{tail}")
    return proc


def _why_unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "test hosts need Linux (systemd-nspawn)"
    if os.geteuid() != 0:
        return "test hosts need root (overlay mounts, network namespaces, systemd-nspawn)"
    for tool, package in (
        ("systemd-nspawn", "systemd-container"),
        ("ssh", "openssh-client"),
        ("ip", "iproute2"),
    ):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install {package}; or tests/hosts/testbed.sh deps)"
    if not (testbed_dir() / "rootfs").is_dir() and shutil.which("mmdebstrap") is None:
        return "no cached root fs and no mmdebstrap to build it (tests/hosts/testbed.sh deps)"
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("SERVE_CONSOLE_REQUIRE_TESTBED") == "1":
        pytest.fail(f"test hosts required (SERVE_CONSOLE_REQUIRE_TESTBED=1) but unavailable: {reason}")
    pytest.skip(f"test hosts unavailable: {reason}")


def _session_lock(timeout_s: float = SESSION_LOCK_WAIT_S) -> contextlib.AbstractContextManager[None]:
    """Hold the testbed for this pytest session; another session on this machine waits its turn."""
    return hold_session_lock(timeout_s, _unavailable)


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """Boot SERVE_CONSOLE_TESTBED_HOSTS (default 2) test hosts for the session; always tear down."""
    reason = _why_unavailable()
    if reason:
        _unavailable(reason)
    count = os.environ.get("SERVE_CONSOLE_TESTBED_HOSTS", "2")
    with _session_lock():
        try:
            try:
                _testbed_sh("down", timeout_s=120)
                start = time.monotonic()
                _testbed_sh("up", count, timeout_s=UP_TIMEOUT_S)
                TIMINGS.append(f"up {count} host(s): {time.monotonic() - start:.1f} s")
            except (TestbedUnavailable, subprocess.TimeoutExpired) as exc:
                _unavailable(str(exc))
            yield Testbed(testbed_dir())
        finally:
            start = time.monotonic()
            with contextlib.suppress(TestbedUnavailable, subprocess.TimeoutExpired):
                _testbed_sh("down", timeout_s=120)
            TIMINGS.append(f"down: {time.monotonic() - start:.1f} s")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, hand the times to the controller (tests/conftest.py prints them)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None and TIMINGS:
        output["testbed_timings"] = list(TIMINGS)


def pytest_terminal_summary(terminalreporter) -> None:
    """Report how long the test hosts took to boot and tear down (for CI's closing note)."""
    if TIMINGS:
        terminalreporter.write_sep("-", "test hosts")
        terminalreporter.write_line("; ".join(TIMINGS))


@pytest.fixture
def clean_testbed(testbed: Testbed) -> Iterator[Testbed]:
    """The session's test hosts, reset to their state after `up` when the test ends."""
    yield testbed
    testbed.reset()
