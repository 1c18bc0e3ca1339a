"""A service over several hosts (issue 20): `nodes = [...]` in hosts.toml, checked at load, and the
flags and variables each node's unit is given (SGLang's --dist-init-addr, vLLM's --master-addr and
--headless) in the file its mapping reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import parse_config
from console.domain.layout import Layout
from console.domain.nodes import NodePlace, node_args, node_ranks
from console.errors import ConfigError
from console.ops.switch.layout_files import NODE_ARGS_VAR, layout_file
from console.sim.host.units import parse_drop_in, parse_env_file

HEAD = """
[hosts.gpu-node-1]
address = "192.0.2.10"
gpu_count = 8

[hosts.gpu-node-2]
address = "192.0.2.11"
gpu_count = 8

[hosts.gpu-node-1.services.ds3]
engine = "{engine}"
url = "http://127.0.0.1:30000"
{mapping}
nodes = ["gpu-node-1", "gpu-node-2"]
nic = "eth1"
dist_port = 5757

[[hosts.gpu-node-1.services.ds3.layouts]]
name = "TP16"
tp = 16
nodes = 2

[[hosts.gpu-node-1.services.ds3.layouts]]
name = "TP8"
tp = 8
"""


def load(text: str, engine: str = "sglang", mapping: str = 'template = "sglang-ds3@.service"'):
    return parse_config((HEAD.format(engine=engine, mapping=mapping) + text).encode(), "hosts.toml", base_dir=Path("/"))


def error(text: str, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        load(text, **kw)
    return str(info.value)


def test_a_worker_host_needs_no_services_and_knows_what_it_is_a_node_of():
    config = load("")
    head, worker = config.hosts
    service = head.services[0]
    assert service.cluster is not None and service.cluster.nodes == ("gpu-node-1", "gpu-node-2")
    assert (service.cluster.nic, service.cluster.dist_port) == ("eth1", 5757)
    assert [lc.nodes for lc in service.layouts] == [2, 1]
    assert worker.services == () and worker.node_of == (service,)
    assert head.node_of == ()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('[[hosts.gpu-node-1.services.ds3.layouts]]\nname = "TP24"\ntp = 24\nnodes = 3\n', "runs on 3 nodes; only 2"),
        ('[[hosts.gpu-node-1.services.ds3.layouts]]\nname = "TP12x2"\ntp = 12\npp = 2\nnodes = 2\n', "needs 12 GPUs"),
        ('[[hosts.gpu-node-1.services.ds3.layouts]]\nname = "TP3"\ntp = 3\nnodes = 2\n', "do not split evenly"),
    ],
)
def test_a_layout_that_cannot_span_its_nodes_is_refused_at_its_line(extra, words):
    message = error(extra)
    assert words in message and message.startswith("hosts.toml:")


def test_a_node_that_is_no_host_or_a_head_written_elsewhere_is_refused():
    text = HEAD.format(engine="sglang", mapping='template = "sglang-ds3@.service"')
    with pytest.raises(ConfigError, match="'gpu-node-3' is not a host of this file"):
        parse_config(text.replace('"gpu-node-2"]', '"gpu-node-3"]').encode(), "hosts.toml", base_dir=Path("/"))
    with pytest.raises(ConfigError, match="the head .* is the host the service is written under"):
        parse_config(text.replace('["gpu-node-1", "gpu-node-2"]', '["gpu-node-2", "gpu-node-1"]').encode(), "hosts.toml",
                     base_dir=Path("/"))  # fmt: skip
    with pytest.raises(ConfigError, match="list them: nodes"):
        parse_config(text.replace('nodes = ["gpu-node-1", "gpu-node-2"]\n', "").replace('nic = "eth1"\n', "")
                     .replace("dist_port = 5757\n", "").encode(), "hosts.toml", base_dir=Path("/"))  # fmt: skip
    with pytest.raises(ConfigError, match="nic"):
        parse_config(text.replace('nic = "eth1"', 'nic = "eth1; rm -rf /"').encode(), "hosts.toml", base_dir=Path("/"))


def test_engine_flags_for_each_node_follow_each_engine():
    head, worker = NodePlace(0, 2, "192.0.2.10", 5757), NodePlace(1, 2, "192.0.2.10", 5757)
    assert node_args("sglang", worker) == ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "192.0.2.10:5757")
    assert node_args("vllm", head) == ("--nnodes", "2", "--node-rank", "0", "--master-addr", "192.0.2.10",
                                       "--master-port", "5757")  # fmt: skip
    assert node_args("vllm", worker)[-1] == "--headless"
    assert node_args("sglang", NodePlace(1, 2, "2001:db8::1", 5757))[-1] == "[2001:db8::1]:5757"
    assert node_args("sglang", NodePlace(0, 1, "192.0.2.10", 5757)) == ()
    assert list(node_ranks(Layout(tp=16), "sglang", worker)) == list(range(8, 16))


@pytest.mark.parametrize(
    ("mapping", "reader"),
    [
        ('template = "sglang-ds3@.service"', parse_env_file),
        ('unit = "sglang-ds3.service"\nenv_file = "/etc/sglang/ds3.env"', parse_env_file),
        ('unit = "sglang-ds3.service"\nmapping = "drop-in"', parse_drop_in),
    ],
)
def test_each_mapping_carries_the_nodes_place_where_its_unit_reads_it(mapping, reader):
    config = load("", mapping=mapping)
    service = config.hosts[0].services[0]
    tp16 = service.layouts[0]
    path, content = layout_file(service, tp16, "HF_TOKEN=kept\n", NodePlace(1, 2, "192.0.2.10", 5757))
    env = reader(content)
    assert env[NODE_ARGS_VAR] == "--nnodes 2 --node-rank 1 --dist-init-addr 192.0.2.10:5757"
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth1"
    if service.template is not None:
        assert path == "/etc/serve-console/ds3.node.env" and env["HF_TOKEN"] == "kept"
