"""A service over two test hosts, driven by the console over SSH (issue 20): DeepSeek-V3 TP16 on tb1 (the
head) and tb2, as hosts.toml describes it (`nodes`, `head_address` on the cluster network, `nic`).

The switch writes each node's file and starts the head first; status judges each node on its own. A
wedge (SIGSTOP of tb2's engine) makes the group unresponsive and a killed unit on tb2 makes it dead, its
cause from tb2's own journal, each within seconds, while tb1's /health keeps answering 200. Stop stops
both. The units are tests/hosts/units/sglang-ds3@.service (simulated SGLang, time scale 0.05).
"""

from __future__ import annotations

import pytest
from waiting import await_for

from console.config import parse_config
from console.factory import open_hosts
from console.ops.status import service_status
from console.ops.switch import READY, stop_service, switch_layout

pytestmark = pytest.mark.integration

UNIT = "sglang-ds3@tp16.service"
CONFIG = """
[hosts.tb1]
ssh_config = "{ssh_config}"
connect_timeout_s = 5.0
gpus = "none"

[hosts.tb2]
ssh_config = "{ssh_config}"
connect_timeout_s = 5.0
gpus = "none"

[hosts.tb1.services.ds3]
engine = "sglang"
url = "http://127.0.0.1:30000"
template = "sglang-ds3@.service"
nodes = ["tb1", "tb2"]
head_address = "{head}"
nic = "cl0"
layouts = [{{ name = "TP16", args = "--tp-size 16", nodes = 2 }}]
"""


@pytest.fixture
async def cluster(testbed, tmp_path):
    if len(testbed.hosts) < 2 or not all(h.cluster_address for h in testbed.hosts[:2]):
        pytest.skip("needs two test hosts with a cluster network (SERVE_CONSOLE_TESTBED_HOSTS >= 2)")
    text = CONFIG.format(ssh_config=testbed.ssh_config, head=testbed.hosts[0].cluster_address)
    config = parse_config(text.encode(), "hosts.toml", base_dir=tmp_path)
    hosts = open_hosts(config)
    yield testbed, hosts
    for host in hosts:
        await host.close()
    for name in ("tb2", "tb1"):
        testbed.ssh(name, f"systemctl kill -s CONT {UNIT}; systemctl stop {UNIT}; systemctl reset-failed {UNIT}; "
                    "rm -f /etc/serve-console/ds3.node.env", check=False)  # fmt: skip


async def group_within(head, service, state: str, timeout_s: float = 60.0):
    """The status once the group is `state` (how soon is bench/dead_rank.py's figure)."""
    async def reached():
        status = await service_status(head, service, fresh_health=True)
        return status if status.group == state else None

    return await await_for(reached, f"the group to be {state}", timeout_s=timeout_s, interval_s=0.2)


async def test_a_wedged_then_a_killed_worker_is_named_over_ssh_while_the_head_answers_200(cluster) -> None:
    bed, (head, worker) = cluster
    service = head.config.services[0]
    result = await switch_layout(head, service, "TP16", timeout_s=120)
    assert result.outcome == READY, result.reason
    node_file = bed.ssh("tb2", "cat /etc/serve-console/ds3.node.env").stdout
    assert f"--nnodes 2 --node-rank 1 --dist-init-addr {bed.hosts[0].cluster_address}:5000" in node_file
    assert 'NCCL_SOCKET_IFNAME="cl0"' in node_file
    status = await group_within(head, service, "alive")
    assert [n.state for n in status.ranks] == ["alive", "alive"], [n.words() for n in status.ranks]
    # the head's own RAS (its engine, under its unit's main process, by `ss -ltnpe`) is believed (issue 30)
    assert not any("judged without RAS" in n.detail for n in status.ranks), [n.words() for n in status.ranks]

    pid = (await worker.services.state(UNIT)).main_pid
    bed.ssh("tb2", f"kill -STOP {pid}")
    wedged = await group_within(head, service, "unresponsive")
    bed.ssh("tb2", f"kill -CONT {pid}")
    assert wedged.group == "unresponsive", [n.words() for n in wedged.ranks]
    assert wedged.health.status == "ready" and "stopped (state T)" in wedged.ranks[1].detail

    bed.ssh("tb2", f"systemctl kill -s KILL {UNIT}")
    dead = await group_within(head, service, "dead")
    assert dead.group == "dead", [n.words() for n in dead.ranks]
    assert dead.health.status == "ready" and dead.health.http_status == 200  # the head still answers
    node = dead.ranks[1]
    assert node.host == "tb2" and node.cause is not None and "killed by signal 9/KILL" in node.cause.summary

    stopped = await stop_service(head, service)
    assert stopped.outcome == "stopped"
    assert not (await head.services.state(UNIT)).is_running


@pytest.mark.parametrize(("nic", "words"), [
    ("eth9", "tb2: nic = 'eth9' is no interface there"),
    ("eth0", "tb2 reaches the head's 10.232.0.1 by cl0, not by nic = 'eth0'"),
])  # fmt: skip
async def test_a_nic_that_does_not_reach_the_head_is_refused_before_anything_stops(testbed, tmp_path, nic,
                                                                                   words) -> None:
    if len(testbed.hosts) < 2 or not all(h.cluster_address for h in testbed.hosts[:2]):
        pytest.skip("needs two test hosts with a cluster network (SERVE_CONSOLE_TESTBED_HOSTS >= 2)")
    text = CONFIG.format(ssh_config=testbed.ssh_config, head=testbed.hosts[0].cluster_address)
    config = parse_config(text.replace('nic = "cl0"', f'nic = "{nic}"').encode(), "hosts.toml", base_dir=tmp_path)
    hosts = open_hosts(config)
    try:
        result = await switch_layout(hosts[0], hosts[0].config.services[0], "TP16", timeout_s=60)
        assert result.outcome == "refused" and words in result.reason, result.reason
        assert not (await hosts[1].services.state(UNIT)).is_running
    finally:
        for host in hosts:
            await host.close()
