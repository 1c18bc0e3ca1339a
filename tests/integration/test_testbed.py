"""Smoke tests of the real test hosts and of the fixture's helpers that other integration tests use."""

from __future__ import annotations

import itertools
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
ENGINE_UNITS = (
    "sglang-k26-tp8.service",
    "sglang-k26-pp8.service",
    "sglang-k26-ep8.service",
    "sglang-k26-tp4ep2.service",
    "sglang-k26.service",
    "sglang-k26-dropin.service",
)


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.2):
    """Poll `predicate` until it returns a truthy value; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def numbering_problems(numbers: list[int]) -> str:
    """What is wrong with lines numbered from 1, in one short line ("" when they are exactly 1..N).

    Cheap on purpose: pytest's diff of two lists of thousands of numbers runs for minutes.
    """
    seen = set(numbers)
    missing = [n for n in range(1, max(numbers, default=0) + 1) if n not in seen]
    back = [(i, a, b) for i, (a, b) in enumerate(itertools.pairwise(numbers), start=1) if b <= a]
    if not missing and not back:
        return ""
    parts = [f"{len(numbers)} lines, numbers {min(numbers)}..{max(numbers)}"]
    if missing:
        parts.append(f"{len(missing)} missing (first: {missing[:8]})")
    if len(seen) < len(numbers):
        parts.append(f"{len(numbers) - len(seen)} repeated")
    if back:
        steps = ", ".join(f"line {i + 1}: {a} -> {b}" for i, a, b in back[:5])
        parts.append(f"{len(back)} steps back ({steps})")
    return "; ".join(parts)


def unit_property(bed, host: str, unit: str, prop: str) -> str:
    return bed.ssh(host, ["systemctl", "show", "-p", prop, "--value", unit]).stdout.strip()


def test_every_host_answers_ssh_by_key_as_each_user(testbed) -> None:
    assert len(testbed.hosts) >= 1
    for h in testbed.hosts:
        assert testbed.ssh(h.name, "hostname").stdout.strip() == h.name
        for user in ("operator", "deploy"):
            assert testbed.ssh(h.name, "id -un", user=user).stdout.strip() == user


def test_hosts_have_distinct_identities_and_this_tree_code(testbed) -> None:
    here = (REPO / "console" / "sim" / "ledger.py").read_text()
    machine_ids, host_keys = set(), set()
    for h in testbed.hosts:
        machine_ids.add(testbed.ssh(h.name, "cat /etc/machine-id").stdout.strip())
        host_keys.add(testbed.ssh(h.name, "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1])
        assert testbed.ssh(h.name, "cat /opt/serve-console/console/sim/ledger.py").stdout == here
    assert len(machine_ids) == len(host_keys) == len(testbed.hosts)


def test_systemd_is_pid1_and_the_system_runs(testbed) -> None:
    for h in testbed.hosts:
        assert testbed.ssh(h.name, "cat /proc/1/comm").stdout.strip() == "systemd"
        state = testbed.ssh(h.name, "systemctl is-system-running --wait", check=False, timeout_s=90)
        assert state.stdout.strip() in ("running", "degraded"), state.stdout + state.stderr


def test_journald_records_lines(testbed) -> None:
    token = f"testbed-smoke-{time.time_ns()}"
    for h in testbed.hosts:
        testbed.ssh(h.name, ["systemd-cat", "-t", "testbed-smoke", "echo", token])
        wait_for(
            lambda name=h.name: token in testbed.ssh(name, "journalctl -t testbed-smoke -o cat").stdout,
            10,
            f"{token} in the journal of {h.name}",
        )


def test_engine_units_are_installed(testbed) -> None:
    units = [*ENGINE_UNITS, "sglang-k26@tp4ep2.service", "sglang-k26@ep8.service", "noisy.service"]
    for h in testbed.hosts:
        for unit in units:
            assert unit_property(testbed, h.name, unit, "LoadState") == "loaded", (h.name, unit)


def test_nvidia_smi_stand_in_prints_csv(testbed) -> None:
    query = "--query-gpu=index,uuid,name,memory.total,memory.used --format=csv,noheader,nounits"
    for h in testbed.hosts:
        rows = [line.split(", ") for line in testbed.ssh(h.name, f"nvidia-smi {query}").stdout.splitlines()]
        assert [int(r[0]) for r in rows] == list(range(8))
        assert all(r[1].startswith("GPU-") and r[2] == GPU_NAME and r[3] == "97887" for r in rows), rows
        assert all(int(r[4]) >= 0 for r in rows)


def test_sudo_needs_a_password_for_operator_but_not_for_deploy(testbed) -> None:
    name = testbed.names[0]
    refused = testbed.ssh(name, "sudo -n true", user="operator", check=False)
    assert refused.returncode != 0
    assert "password is required" in refused.stderr
    allowed = testbed.ssh(name, "sudo -n systemctl is-active ssh", user="deploy")
    assert allowed.stdout.strip() == "active"


def test_sim_engine_unit_starts_and_its_lines_reach_the_journal(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[0]
    unit = "sglang-k26-ep8.service"
    bed.write_file(name, "/etc/serve-console/sim.env", "SERVE_CONSOLE_SIM_TIME_SCALE=0.02\n")
    bed.ssh(name, ["systemctl", "start", unit])
    # The engine's own stdout/stderr, not systemd's messages about the unit.
    engine_lines = ["journalctl", "-u", unit, "_TRANSPORT=stdout", "-o", "cat"]
    lines = wait_for(
        lambda: bed.ssh(name, engine_lines).stdout.splitlines(), 15, f"engine lines in journalctl -u {unit}"
    )
    state = unit_property(bed, name, unit, "ActiveState")
    assert state == "active", "\n".join([state, *lines[-20:]])
    bed.ssh(name, ["systemctl", "stop", unit])
    assert unit_property(bed, name, unit, "ActiveState") in ("inactive", "failed")


def test_journald_keeps_every_line_at_2000_per_second(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[0]
    # Only this run's lines: other tests ran noisy.service on this host in the same boot (the sudo
    # and reconnect tests), and `journalctl -u` lists their runs too, each counting from 1 again.
    run = "systemctl start noisy.service && systemctl show -p InvocationID --value noisy.service"
    invocation = bed.ssh(name, f"{run} && sleep 2 && systemctl stop noisy.service").stdout.strip()
    assert len(invocation) == 32, f"no invocation id for noisy.service: {invocation!r}"
    bed.ssh(name, "journalctl --sync")
    out = bed.ssh(name, ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat"]).stdout
    numbers = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith("noisy line ")]
    assert len(numbers) >= 2000, f"only {len(numbers)} noisy lines in the journal after 2 s"
    problems = numbering_problems(numbers)
    assert not problems, problems


def test_cut_network_stops_ssh_and_restore_brings_it_back(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[0]
    with bed.network_cut(name):
        cut = bed.ssh(name, "true", check=False, extra_options=("-o", "ConnectTimeout=1"))
        assert cut.returncode == 255
    wait_for(lambda: bed.ssh(name, "true", check=False).returncode == 0, 10, f"ssh to {name} after restore")


def test_stopped_host_is_down_and_comes_back(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[-1]
    bed.stop_host(name)
    assert not bed.is_running(name)
    down = bed.ssh(name, "true", check=False, extra_options=("-o", "ConnectTimeout=1"))
    assert down.returncode == 255
    bed.start_host(name)
    assert bed.is_running(name)
    assert bed.ssh(name, "hostname").stdout.strip() == name


def test_replaced_host_key_is_refused_until_restored(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[0]
    old = bed.known_hosts.read_text()
    new_key = bed.replace_host_key(name)
    assert new_key.split()[1] not in old
    refused = bed.ssh(name, "true", check=False)
    assert refused.returncode == 255
    assert "host key" in refused.stderr.lower() or "identification has changed" in refused.stderr.lower()
    bed.restore_host_key(name)
    assert bed.ssh(name, "true").returncode == 0


def test_drop_ssh_sessions_ends_open_connections_busy_and_idle(clean_testbed) -> None:
    bed = clean_testbed
    name = bed.names[0]
    base = ["ssh", "-F", str(bed.ssh_config)]
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with (
        subprocess.Popen([*base, name, "--", "sleep 60"], **quiet) as busy,
        subprocess.Popen([*base, "-N", name], **quiet) as idle,
    ):
        # Three sshd processes besides the listener: busy, idle, and this check's own connection.
        wait_for(
            lambda: bed.ssh(name, "pgrep -cf '^sshd: [^/]'", check=False).stdout.strip() == "3",
            10,
            "both held connections to be logged in",
        )
        bed.drop_ssh_sessions(name)
        assert busy.wait(timeout=10) == 255
        assert idle.wait(timeout=10) == 255
    assert bed.ssh(name, "true").returncode == 0


@pytest.mark.parametrize(
    ("mapping", "unit", "expected"),
    [
        ("unit-per-layout", "sglang-k26-tp4ep2.service", "--tp-size 4 --ep-size 2"),
        ("template", "sglang-k26@pp8.service", "--pp-size 8"),
        ("env-file", "sglang-k26.service", "--tp-size 8 --ep-size 8"),
        ("drop-in", "sglang-k26-dropin.service", "--tp-size 4 --ep-size 2"),
    ],
)
def test_each_mapping_hands_its_layout_flags_to_the_engine(clean_testbed, mapping, unit, expected) -> None:
    bed = clean_testbed
    name = bed.names[0]
    # The story's pace: TP4 EP2 would otherwise hit its OOM and exit before we look at it.
    bed.write_file(name, "/etc/serve-console/sim.env", "SERVE_CONSOLE_SIM_TIME_SCALE=1\n")
    if mapping == "env-file":
        bed.write_file(name, "/etc/serve-console/sglang-k26.env", f"SERVE_CONSOLE_LAYOUT_ARGS={expected}\n")
    if mapping == "drop-in":
        bed.write_file(
            name,
            f"/etc/systemd/system/{unit}.d/layout.conf",
            f'[Service]\nEnvironment="SERVE_CONSOLE_LAYOUT_ARGS={expected}"\n',
        )
        bed.ssh(name, "systemctl daemon-reload")
    bed.ssh(name, ["systemctl", "start", unit])
    pid = unit_property(bed, name, unit, "MainPID")
    args = bed.ssh(name, ["ps", "-o", "args=", "-p", pid]).stdout
    bed.ssh(name, ["systemctl", "stop", unit])
    assert f"console.sim.sglang --model-path /opt/models/kimi-k2.6 {expected} --host" in " ".join(
        args.split()
    )
